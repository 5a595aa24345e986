"""The workspace tools, performed on the execution plane: run a command (sandboxed),
read, write and list files. Every failure becomes a result the model reads."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from schemas.address import parse_address
from schemas.harness import Artifact, ToolResult, ToolStatus
from schemas.sandbox import (
    Allowed,
    CommandLimits,
    LimitName,
    SandboxPolicy,
    workspace_refusal,
)
from schemas.workspace import WorkspaceCall, WorkspaceReply
from services.tools.base import RESULT_LIMIT, capped
from services.tools.deadline import DEFAULT_SECONDS, DeadlinePassedError, within
from services.workspace import files
from services.workspace.artifacts import store_file
from services.workspace.files import Workspace, WorkspaceError
from services.workspace.sandbox import (
    DiskFloor,
    Mounts,
    Outcome,
    SandboxUnavailableError,
    find_bwrap,
    run_sandboxed,
)
from services.workspace.volumes import Volumes

MAX_ARTIFACTS = 100
UNKNOWN_OUTCOME = (
    "The process running this command stopped before the command finished, so it may or "
    "may not have taken effect. It was not run again."
)
LIMIT_UNITS: dict[LimitName, Callable[[CommandLimits], str]] = {
    "wall time": lambda limits: f"{limits.wall_seconds:g} seconds",
    "cpu time": lambda limits: f"{limits.cpu_seconds:g} CPU seconds",
    "memory": lambda limits: f"{limits.memory_mb} MB",
    "processes": lambda limits: f"{limits.processes} processes",
    "output": lambda limits: f"{limits.output_bytes} bytes",
    "quota": lambda _limits: "the workspace quota",
    "disk reserve": lambda _limits: "the free space the disk keeps",
}


def result(call: WorkspaceCall, status: ToolStatus, content: str) -> ToolResult:
    return ToolResult(call.call.id, call.call.name, status, capped(content))


def unknown(call: WorkspaceCall) -> WorkspaceReply:
    return WorkspaceReply(result(call, "unknown", UNKNOWN_OUTCOME))


@dataclass(frozen=True)
class WorkspaceHost:
    home: Path
    bwrap: str
    """The bwrap setting: a name on PATH or a path."""
    policy: SandboxPolicy = field(default_factory=SandboxPolicy)
    """Checked again on every call: a spec published before the operator lowered a
    ceiling or took a grant back runs under today's policy."""
    tmp_mb: int = 64
    """The size of a command's /tmp and of its /dev/shm."""
    reserve_mb: int = 1024
    """Free space the disk holding the home keeps: below it commands are refused."""
    deadline: float = DEFAULT_SECONDS
    """Seconds a file tool may take (a command has its own wall-time limit)."""
    allowed: tuple[Allowed, ...] = ()
    """What a sandbox with network may reach in the blocked ranges."""
    volumes: Volumes | None = None
    """The workspaces' own filesystem, where each quota is the kernel's; None: folders."""

    @property
    def store(self) -> Path:
        return self.home / "artifacts"

    async def perform(self, call: WorkspaceCall, stopped: Callable[[], bool]) -> WorkspaceReply:
        """Run one workspace call; never raises for the call's own failures."""
        refused = workspace_refusal(call.settings, parse_address(call.agent).tenant, self.policy)
        if refused:
            return WorkspaceReply(result(call, "error", f"The agent's spec is refused: {refused}"))
        quota = call.settings.quota_mb * 2**20
        try:
            workspace = files.open_workspace(self.home, call.agent, quota, self.volumes)
            return await self._perform(call, workspace, stopped)
        except (
            WorkspaceError,
            SandboxUnavailableError,
            DeadlinePassedError,
            KeyError,
            UnicodeError,
            OSError,
        ) as error:
            # A write given up at its deadline may have happened: its outcome is unknown.
            overdue_write = (
                isinstance(error, DeadlinePassedError) and call.call.name == "write_file"
            )
            status: ToolStatus = "unknown" if overdue_write else "error"
            return WorkspaceReply(result(call, status, self._failure(call, error)))

    async def _perform(
        self, call: WorkspaceCall, workspace: Workspace, stopped: Callable[[], bool]
    ) -> WorkspaceReply:
        arguments = call.call.arguments
        match call.call.name:
            case "run_command":
                return await self._run(call, workspace, str(arguments["command"]), stopped)
            case "write_file":
                return await within(self.deadline, lambda: self._write(call, workspace))
            case "read_file":
                path = str(arguments["path"])
                text = await within(
                    self.deadline, lambda: files.read_text(workspace, path, RESULT_LIMIT)
                )
                return WorkspaceReply(result(call, "ok", text))
            case "list_files":
                folder = str(arguments.get("path", ""))
                listing = await within(self.deadline, lambda: files.list_entries(workspace, folder))
                return WorkspaceReply(result(call, "ok", listing))
        return WorkspaceReply(result(call, "error", f"{call.call.name} is no workspace tool."))

    def _failure(self, call: WorkspaceCall, error: Exception) -> str:
        """The sentence for a failed call: the error's own when it is one of ours, else
        one about what failed (never a library's text, never a host path)."""
        name = call.call.name
        if isinstance(error, WorkspaceError | SandboxUnavailableError):
            return str(error)
        if isinstance(error, DeadlinePassedError):
            maybe = " The file may or may not have been written." if name == "write_file" else ""
            return f"{name} did not finish within its deadline of {self.deadline:g} s.{maybe}"
        if isinstance(error, KeyError):
            return f"{name} needs the argument {error.args[0]!r}."
        if isinstance(error, UnicodeError):
            return f"{name} failed: the text cannot be written as UTF-8."
        code = getattr(error, "errno", None)
        return f"{name} failed: {os.strerror(code).lower() if code else 'the system refused it'}."

    def _write(self, call: WorkspaceCall, workspace: Workspace) -> WorkspaceReply:
        relative = str(call.call.arguments["path"])
        content = str(call.call.arguments["content"])
        path = files.write_text(workspace, relative, content)
        artifact = store_file(self.store, path, path.relative_to(workspace.root).as_posix())
        said = f"Wrote {artifact.size} bytes to {artifact.path} (sha256 {artifact.sha256})."
        return WorkspaceReply(result(call, "ok", said), (artifact,))

    async def _run(
        self,
        call: WorkspaceCall,
        workspace: Workspace,
        command: str,
        stopped: Callable[[], bool],
    ) -> WorkspaceReply:
        bwrap = find_bwrap(self.bwrap)
        if self.volumes is not None and not workspace.kernel_quota:
            raise WorkspaceError(
                "Commands are refused in this workspace: it is a folder made by hand inside "
                "the workspaces' filesystem, not a workspace of its own, so no quota holds "
                "its commands. The file tools still work."
            )
        floor = self._floor()
        mounts = Mounts(
            workspace.root,
            workspace.uid,
            self._lent(call),
            call.settings.network,
            tmp_bytes=self.tmp_mb * 2**20,
        )
        before = await asyncio.to_thread(files.snapshot, workspace.root)
        room = await self._room(workspace, before, floor.free() - floor.reserve_bytes)
        limits = call.settings.limits
        outcome = await run_sandboxed(
            mounts,
            bwrap,
            command,
            limits=limits,
            file_bytes=room,
            stopped=stopped,
            floor=floor,
            allowed=self.allowed,
        )
        after = await asyncio.to_thread(files.snapshot, workspace.root)
        artifacts = await asyncio.to_thread(self._keep, workspace, files.changed(before, after))
        # On the workspaces' filesystem the kernel holds the quota (and says EDQUOT).
        used = 0 if workspace.kernel_quota else await _held(workspace.root, after)
        if outcome.limit is None and used > workspace.quota_bytes:
            outcome.limit = "quota"
        status: ToolStatus = "ok" if outcome.exit_code == 0 and outcome.limit is None else "error"
        said = _describe(outcome, limits, (used, workspace.quota_bytes), self.tmp_mb)
        return WorkspaceReply(result(call, status, said), artifacts)

    def _floor(self) -> DiskFloor:
        """The disk's reserve; a sentence when the disk is at it already."""
        floor = DiskFloor(self.home, self.reserve_mb * 2**20)
        short = floor.short()
        if short:
            raise WorkspaceError(
                f"Commands are refused for now: the disk that holds the workspaces has "
                f"{short}, at or below what it keeps in reserve ({self.reserve_mb} MB, "
                "TEASPILL_DISK_RESERVE_MB, and 1% of its inodes). Remove files to make room."
            )
        return floor

    async def _room(
        self, workspace: Workspace, before: dict[str, files.FileStat], spare: int
    ) -> int:
        """The most one file of the command may hold: the space above the disk's reserve
        and, in plain folders, what the workspace has left of its quota (on the workspaces'
        filesystem the kernel counts the quota, where allocated blocks overstate it)."""
        if workspace.kernel_quota:
            return max(spare, 1)
        held = max(
            sum(e.size for e in before.values()),
            await asyncio.to_thread(_allocated, workspace.root),
        )
        return max(min(workspace.quota_bytes - held, spare), 1)

    def _lent(self, call: WorkspaceCall) -> Path | None:
        if call.lent_by is None:
            return None
        return files.existing_workspace(self.home, call.lent_by)

    def _keep(self, workspace: Workspace, paths: list[str]) -> tuple[Artifact, ...]:
        kept = []
        for relative in paths[:MAX_ARTIFACTS]:
            try:
                kept.append(store_file(self.store, workspace.root / relative, relative))
            except FileNotFoundError:
                continue
        return tuple(kept)


async def _held(root: Path, entries: dict[str, files.FileStat]) -> int:
    """What the workspace holds against its quota: its files' sizes, or the space its
    files and folders take on disk where that is more."""
    sizes = sum(entry.size for entry in entries.values())
    return max(sizes, await asyncio.to_thread(_allocated, root))


def _allocated(root: Path) -> int:
    """The disk space the workspace takes: every file's and folder's allocated blocks, so
    that folders and preallocated space count against the quota, not only file sizes."""
    total = 0
    for folder, dirs, names in os.walk(root):
        for name in (*dirs, *names):
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512  # noqa: PTH118
    return total


def _over_quota(used: int, quota: int) -> str:
    named = f"its quota of {quota / 2**20:g} MB (workspace.quota_mb)"
    if used > quota:
        return (
            f" The workspace now holds {used} bytes, past {named}: files written past it "
            "were cut, and write_file refuses until files are removed."
        )
    return (
        f" A write was refused at the workspace's quota: the workspace is full at {named}, "
        "counting the space its files, folders and their records take on disk. Remove "
        "files to make room."
    )


def _describe(outcome: Outcome, limits: CommandLimits, held: tuple[int, int], tmp_mb: int) -> str:
    """`held`: the bytes the workspace holds, and its quota."""
    if outcome.limit is not None and outcome.limit != "quota":
        head = (
            f"Killed with its whole process tree after {outcome.seconds:.1f} s: the command "
            f"passed its {outcome.limit} limit ({LIMIT_UNITS[outcome.limit](limits)})."
        )
    else:
        head = f"Exit status {outcome.exit_code} after {outcome.seconds:.1f} s."
    if outcome.limit is None and b"No space left on device" in outcome.output[-4000:]:
        head += (
            f" A write found no space left: /tmp and /dev/shm hold {tmp_mb} MB each "
            "(TEASPILL_SANDBOX_TMP_MB), the workspace its quota."
        )
    if outcome.limit == "quota":
        head += _over_quota(*held)
    text = outcome.output.decode("utf-8", errors="replace")
    more = outcome.output_bytes - len(outcome.output)
    if more > 0:
        text += f"\n[... {more} more bytes of output not kept ...]"
    return f"{head}\n--- output ---\n{text}" if text else f"{head}\n(no output)"
