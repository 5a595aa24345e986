"""Where a page's examples run: a temporary home, free ports, and the processes they start.

The docs show the default ports (8000, 8080, 9070, 9080, ...) as a user types them; the
sandbox rewrites those in each block to the free ports of its own stack, so examples run
next to any other stack on the machine and still read as the user runs them.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from services.stack import free_port, isolated_settings, settings_env
from services.stack.process import _wait_group_gone
from services.stack.restate import restate_env
from tests.doc_examples import ROOT, Block

BLOCK_TIMEOUT = 900.0
"""Generous: a block may run several turns of the real model on a busy machine."""
HOSTS = r"(?:localhost|127\.0\.0\.1|0\.0\.0\.0)"
FAILURE_SIGNS = ("Traceback (most recent call last)", '{"error":', '{"error" :')


class Sandbox:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.settings = isolated_settings(directory / "home")
        s = self.settings
        self.ports = {
            8000: s.gateway_port,
            8080: s.ingress_port,
            9070: s.admin_port,
            9080: s.endpoint_port,
            5122: s.node_port,
            9081: free_port(),  # a second plane, as docs/operations.md runs one
        }
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("TEASPILL_")}
        self.env = {
            **inherited,
            **settings_env(s),
            **restate_env(s),
            "PYTHONPATH": str(ROOT),
        }
        _mirror(ROOT, directory)
        self._started: list[subprocess.Popen[bytes]] = []
        self._count = 0

    def rewrite(self, text: str) -> str:
        """The block with each documented default port replaced by the sandbox's."""

        def port(match: re.Match[str]) -> str:
            number = int(match.group("port"))
            return f"{match.group('head')}{self.ports.get(number, number)}"

        return re.sub(rf"(?P<head>{HOSTS}:|(?<=\s):)(?P<port>\d{{4}})\b", port, text)

    def run_shell(self, block: Block) -> str:
        """Run an `sh` block with bash (-e, pipefail); the output, or an AssertionError
        that shows the block, its exit and its output."""
        script = self.rewrite(block.text)
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
        """Write a `python` or `js` block to its file (a file a `sh` block runs gets the
        sandbox's ports, as that block does); the file's path."""
        suffix = ".mjs" if block.language == "js" else ".py"
        name = block.file_name or f"example_{block.line}{suffix}"
        path = self.directory / name
        assert not path.exists(), f"{block.where}: {path.name} would overwrite a file"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.rewrite(block.text) if block.run_by_shell() else block.text)
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
