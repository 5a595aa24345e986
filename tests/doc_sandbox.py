"""Where a page's examples run: a temporary home, free ports, and the processes they start.

The sandbox is a user who chose other ports than the defaults: its shell sets the port
variables (`TEASPILL_GATEWAY_PORT`, ...) and the ports of what a page starts by hand
(`EXECUTION_PORT`, `NEW_PORT`, `TLS_PORT`), and nothing in a block is rewritten. A page's
`sh` blocks run one after another in one terminal session: what a block exports (`eval
"$(teaspill env)"`) the next one has. So an example that names a default port instead of
taking its address from the variables fails here, as it would for that user.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from services.stack import free_port, isolated_settings, settings_env
from services.stack.process import _wait_group_gone
from services.stack.restate import restate_env
from services.workspace.volumes import release
from tests.doc_examples import ROOT, Block

BLOCK_TIMEOUT = 900.0
"""Generous: a block may run several turns of the real model on a busy machine."""
FAILURE_SIGNS = ("Traceback (most recent call last)", '{"error":', '{"error" :')


class Sandbox:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.settings = isolated_settings(directory / "home")
        s = self.settings
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("TEASPILL_")}
        self.env = {
            **inherited,
            **settings_env(s),
            **restate_env(s),
            "EXECUTION_PORT": str(free_port()),  # a second plane, as docs/operations.md runs
            "NEW_PORT": str(free_port()),  # new code beside the old, as docs/upgrading.md does
            "TLS_PORT": str(free_port()),  # the TLS proxy of docs/production.md
            "PYTHONPATH": str(ROOT),
        }
        self.session = directory / "session.sh"
        """What the page's blocks exported so far, read by the next block."""
        _mirror(ROOT, directory)
        self._started: list[subprocess.Popen[bytes]] = []
        self._count = 0

    def run_shell(self, block: Block) -> str:
        """Run an `sh` block with bash (-e, pipefail), in the session the page's blocks
        before it left; the output, or an AssertionError that shows the block, its exit and
        its output."""
        script = (
            f"[ -f {self.session} ] && . {self.session}\n"
            f"trap 'export -p > {self.session}' EXIT\n"
            f"{block.text}"
        )
        output = self._fresh(".out")
        with output.open("wb") as sink:
            # Output goes to a file: a server a block leaves in the background keeps a pipe
            # open, and would hold the runner until it ends.
            proc = subprocess.Popen(
                ["bash", "-e", "-o", "pipefail", "-c", script],
                cwd=self.directory,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            self._started.append(proc)
            try:
                code = proc.wait(BLOCK_TIMEOUT)
            except subprocess.TimeoutExpired:
                code = None
        text = output.read_text(errors="replace")
        failed = code != 0 or any(sign in text for sign in FAILURE_SIGNS)
        if failed:
            ended = "timed out" if code is None else f"exited {code}"
            raise AssertionError(f"{block.where} {ended}:\n{script}\n--- output:\n{text}")
        return text

    def run_python(self, block: Block) -> Path:
        """Write a `python` block to its file and run it (unless the page's `sh` blocks
        run it, on the stack); the file's path."""
        path = self.write_file(block)
        if block.run_by_shell():
            return path
        done = subprocess.run(
            [sys.executable, str(path)],
            cwd=self.directory,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT,
            check=False,
        )
        assert done.returncode == 0, f"{block.where} exited {done.returncode}:\n{done.stderr}"
        return path

    def write_file(self, block: Block) -> Path:
        """Write a `python` or `js` block to its file; the file's path."""
        suffix = ".mjs" if block.language == "js" else ".py"
        name = block.file_name or f"example_{block.line}{suffix}"
        path = self.directory / name
        assert not path.exists(), f"{block.where}: {path.name} would overwrite a file"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.text)
        return path

    def close(self) -> None:
        """Stop a stack a block started with `teaspill up --detach`, then every process
        a block left behind."""
        subprocess.run(
            [sys.executable, "-m", "services.cli.main", "down"],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            timeout=120,
            check=False,
        )
        for proc in self._started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self._started:
            _wait_gone(proc.pid)
            proc.wait()
        # An endpoint a block started by hand leaves the workspaces' image mounted.
        release(self.settings.home)

    def _fresh(self, suffix: str) -> Path:
        self._count += 1
        return self.directory / f"block-{self._count}{suffix}"


def _mirror(root: Path, directory: Path) -> None:
    """Link the repository's top level into `directory`, so blocks run there with the
    paths a user types (`.venv/bin/teaspill`, `examples/...`) and the files they write
    stay in the sandbox."""
    for entry in root.iterdir():
        if entry.name not in {".git", ".teaspill"}:
            (directory / entry.name).symlink_to(entry)


def _wait_gone(group: int) -> None:
    """SIGKILL what SIGTERM did not end."""
    _wait_group_gone(group, timeout=20.0)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
