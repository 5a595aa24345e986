"""Workspaces on their own filesystem (a btrfs image, each workspace a subvolume), with real
bwrap and a real loop mount: the kernel holds a command to its workspace's quota however
many files or folders it makes, and a command cannot leave its quota group."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.chat import ToolCall
from schemas.sandbox import WorkspaceSettings
from schemas.workspace import WorkspaceCall
from services.workspace.lifecycle import copy_workspace
from services.workspace.tools import WorkspaceHost
from services.workspace.volumes import (
    SUBVOLUME_INODE,
    DiskMode,
    DiskUnavailableError,
    mounted_under,
    prepare,
    release,
)

MANY_FILES = "python3 -c \"\nfor i in range(100000):\n    open(f'f{i}', 'w').write('x' * {size})\""
MANY_FOLDERS = "python3 -c \"import os\nfor i in range(1000000): os.mkdir(f'd{i}')\"; echo done"


def referenced(root: Path) -> int:
    """The bytes the kernel counts against the workspace's quota (its qgroup's referenced
    bytes, once the filesystem has committed what was written)."""
    subprocess.run(["btrfs", "filesystem", "sync", str(root)], check=True, capture_output=True)
    shown = subprocess.run(
        ["btrfs", "qgroup", "show", "-rf", "--raw", str(root)],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(shown.stdout.strip().splitlines()[-1].split()[1])


def mounted(home: Path) -> bool:
    return os.path.ismount(home / "workspaces")


@pytest.fixture
def image(tmp_path: Path) -> Iterator[WorkspaceHost]:
    """A host whose workspaces are subvolumes of an image in a home of its own; unmounted
    after the test."""
    volumes = prepare(tmp_path, "image", 1024)
    assert volumes is not None
    try:
        yield WorkspaceHost(tmp_path, "bwrap", volumes=volumes)
    finally:
        volumes.close()
        assert release(tmp_path)
    assert not mounted(tmp_path)


def run(host: WorkspaceHost, command: str, quota_mb: int = 2, address: str = "acme.box") -> str:
    call = WorkspaceCall(
        address,
        ToolCall("c1", "run_command", {"command": command}),
        f"key-{command}-{quota_mb}",
        WorkspaceSettings(quota_mb=quota_mb),
    )
    return asyncio.run(host.perform(call, lambda: False)).result.content


def test_a_workspace_is_a_subvolume_of_the_mounted_image(image: WorkspaceHost) -> None:
    assert "Exit status 0" in run(image, "echo hi > a")
    root = image.home / "workspaces/acme/acme.box"
    assert root.stat().st_ino == SUBVOLUME_INODE
    assert mounted(image.home)
    assert (image.home / "workspaces.img").stat().st_blocks * 512 < 64 * 2**20  # sparse


@pytest.mark.parametrize("size", [1000, 5000])
def test_one_command_writing_many_small_files_stops_at_the_quota(
    image: WorkspaceHost, size: int
) -> None:
    """Files of 1000 bytes live in the filesystem's metadata, of 5000 in data blocks: the
    quota counts both."""
    said = run(image, MANY_FILES.replace("{size}", str(size)))
    assert "A write was refused at the workspace's quota" in said
    assert "its quota of 2 MB (workspace.quota_mb)" in said
    assert "Disk quota exceeded" in said
    root = image.home / "workspaces/acme/acme.box"
    assert 2**20 < referenced(root) <= 2 * 2**20
    assert len(list(root.iterdir())) * size < 2 * 2**20


def test_one_command_making_many_folders_stops_at_the_quota(image: WorkspaceHost) -> None:
    said = run(image, MANY_FOLDERS, quota_mb=1)
    assert "A write was refused at the workspace's quota" in said
    assert "Disk quota exceeded" in said
    root = image.home / "workspaces/acme/acme.box"
    assert 100 < len(list(root.iterdir())) < 100_000
    assert referenced(root) <= 2**20


def test_a_quota_raised_in_a_new_spec_applies_at_the_next_call(image: WorkspaceHost) -> None:
    write = "head -c 3000000 /dev/zero > big && echo written"
    assert "Disk quota exceeded" in run(image, write, quota_mb=2)
    said = run(image, f"rm big; {write}", quota_mb=8)
    assert said.startswith("Exit status 0"), said
    assert "written" in said
    assert "Disk quota exceeded" in run(image, "head -c 3000000 /dev/zero > more", quota_mb=4)


def test_a_command_cannot_make_a_subvolume_or_a_snapshot(image: WorkspaceHost) -> None:
    said = run(
        image,
        "btrfs subvolume create nested; btrfs subvolume snapshot . snap; "
        "btrfs qgroup limit none .; btrfs quota disable .; "
        "btrfs subvolume delete /workspace; rmdir /workspace; ls",
    )
    assert said.count("Inappropriate ioctl for device") >= 4, said
    assert "rmdir: failed to remove '/workspace'" in said
    root = image.home / "workspaces/acme/acme.box"
    assert not (root / "nested").exists()
    assert not (root / "snap").exists()
    assert "Disk quota exceeded" in run(image, "head -c 3000000 /dev/zero > big")


def test_copies_work_where_a_reflink_is_refused(image: WorkspaceHost) -> None:
    said = run(
        image,
        "head -c 300000 /dev/urandom > a; cp a b && cmp a b && echo same; "
        "cp --reflink=always a c || echo no-reflink",
    )
    assert "same" in said
    assert "no-reflink" in said


def test_a_forks_copy_is_a_subvolume_of_its_own_held_to_its_quota(image: WorkspaceHost) -> None:
    """The copy is made in a subvolume limited to the fork's quota, then renamed into
    place: a source past that quota fails the copy and leaves nothing behind."""
    run(image, "head -c 3000000 /dev/zero > big; echo notes > notes.txt", quota_mb=8)
    tenant = image.home / "workspaces/acme"

    assert copy_workspace(image.home, "acme.box", "acme.fork", 8 * 2**20, image.volumes) == 2

    fork = tenant / "acme.fork"
    assert fork.stat().st_ino == SUBVOLUME_INODE
    assert (fork / "notes.txt").read_text() == "notes\n"
    with pytest.raises(OSError, match="quota"):
        copy_workspace(image.home, "acme.box", "acme.small", 2**20, image.volumes)
    assert sorted(p.name for p in tenant.iterdir()) == ["acme.box", "acme.fork"]


def test_a_lent_workspace_is_read_only_to_the_child(image: WorkspaceHost) -> None:
    run(image, "echo plan > plan.txt", address="acme.parent")
    call = WorkspaceCall(
        "acme.parent.t1r1c0",
        ToolCall("c1", "run_command", {"command": "cat /parent/plan.txt; echo x > /parent/y"}),
        "key-child",
        WorkspaceSettings(),
        lent_by="acme.parent",
    )
    said = asyncio.run(image.perform(call, lambda: False)).result.content
    assert "plan" in said
    assert "Read-only file system" in said


def test_mounting_is_idempotent_and_kept_while_a_process_holds_it(tmp_path: Path) -> None:
    first = prepare(tmp_path, "image", 1024)
    second = prepare(tmp_path, "auto")
    assert first is not None
    assert second is not None
    try:
        first.close()
        assert not release(tmp_path), "the second still holds it"
        assert mounted(tmp_path)
    finally:
        second.close()
        assert release(tmp_path)
    assert not mounted(tmp_path)
    assert release(tmp_path)


def test_plain_folders_are_never_hidden_under_the_image(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old = tmp_path / "workspaces/acme/acme.old"
    old.mkdir(parents=True)
    (old / "kept.txt").write_text("kept")
    with pytest.raises(DiskUnavailableError, match="already holds workspaces as plain folders"):
        prepare(tmp_path, "image")
    with caplog.at_level(logging.WARNING):
        assert prepare(tmp_path, "auto") is None
    assert "quota is checked after each command" in caplog.text
    assert not mounted(tmp_path)
    assert (old / "kept.txt").read_text() == "kept"
    assert not (tmp_path / "workspaces.img").exists()


def test_folder_mode_mounts_nothing(tmp_path: Path) -> None:
    assert prepare(tmp_path, "folder") is None
    assert not mounted(tmp_path)
    host = WorkspaceHost(tmp_path, "bwrap")
    said = run(host, "for i in $(seq 3000); do mkdir d$i; done", quota_mb=1)
    assert "past its quota of 1 MB" in said


def test_a_mount_left_by_a_killed_process_is_taken_up_again(tmp_path: Path) -> None:
    """The mount survives its process (a SIGKILL drops only the hold), and the next start
    reuses it with the data in it."""
    code = (
        "import sys; from pathlib import Path; from services.workspace.volumes import prepare; "
        "v = prepare(Path(sys.argv[1]), 'image', 1024); "
        "(v.mount / 'left.txt').write_text('left')"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True)
    assert mounted(tmp_path)
    again = prepare(tmp_path, "image")
    assert again is not None
    try:
        assert (again.mount / "left.txt").read_text() == "left"
    finally:
        again.close()
        assert release(tmp_path)


def test_write_file_past_the_kernels_count_is_refused_with_a_sentence(
    image: WorkspaceHost,
) -> None:
    """The service writes as root, and the kernel holds root to the quota too: files that
    live in the metadata fill the quota before their sizes add up to it."""
    run(image, MANY_FILES.replace("{size}", "1000"))
    call = WorkspaceCall(
        "acme.box",
        ToolCall("c2", "write_file", {"path": "notes.txt", "content": "n" * 100_000}),
        "key-write",
        WorkspaceSettings(quota_mb=2),
    )
    reply = asyncio.run(image.perform(call, lambda: False)).result
    assert reply.status == "error"
    assert reply.content == "'notes.txt' cannot be written: the workspace's quota is used up."


def test_a_folder_made_by_hand_in_the_image_takes_file_tools_but_no_commands(
    image: WorkspaceHost,
) -> None:
    (image.home / "workspaces/acme/acme.box").mkdir(parents=True)
    said = run(image, "echo ran")
    assert said.startswith("Commands are refused in this workspace: it is a folder made by hand")
    call = WorkspaceCall(
        "acme.box",
        ToolCall("c2", "write_file", {"path": "a.txt", "content": "a"}),
        "key-write",
        WorkspaceSettings(),
    )
    assert asyncio.run(image.perform(call, lambda: False)).result.status == "ok"


REPO = Path(__file__).resolve().parents[2]
REFUSED_AS_ANOTHER_USER = """
import sys
import tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from services.workspace.volumes import DiskUnavailableError, prepare
try:
    prepare(Path(sys.argv[2]), "image")
except DiskUnavailableError as error:
    print(error)
print(prepare(Path(sys.argv[2]), "auto"))
"""


def test_a_service_not_run_as_root_keeps_folders_and_image_mode_says_why() -> None:
    """Run as another user (the system's python: the module needs nothing else)."""
    home = Path(tempfile.mkdtemp())
    try:
        os.chown(home, 1_499_999, 1_499_999)
        user = ["setpriv", "--reuid=1499999", "--regid=1499999", "--clear-groups"]
        ran = subprocess.run(
            [*user, "/usr/bin/python3", "-c", REFUSED_AS_ANOTHER_USER, str(REPO), str(home)],
            capture_output=True,
            text=True,
            check=True,
        )
        assert ran.stdout.splitlines() == [
            "the workspaces' image needs the service to run as root",
            "None",
        ]
        assert "quota is checked after each command, not by the kernel" in ran.stderr
        assert not mounted(home)
        assert list(home.iterdir()) == []
    finally:
        shutil.rmtree(home)


def test_an_image_another_machine_mounted_is_refused_in_every_mode(tmp_path: Path) -> None:
    """A home on a shared volume: the image another machine has mounted is not mounted a
    second time, and auto does not fall back to folders beside it."""
    first = prepare(tmp_path, "image", 1024)
    assert first is not None
    assert (tmp_path / "workspaces.mounted").read_text().strip() == os.uname().nodename
    first.close()
    assert release(tmp_path)
    assert not (tmp_path / "workspaces.mounted").exists()
    (tmp_path / "workspaces.mounted").write_text("elsewhere\n")
    modes: tuple[DiskMode, ...] = ("auto", "image")
    for mode in modes:
        with pytest.raises(DiskUnavailableError, match="mounted by the machine 'elsewhere'"):
            prepare(tmp_path, mode)
    assert not mounted(tmp_path)
    (tmp_path / "workspaces.mounted").unlink()
    again = prepare(tmp_path, "auto")
    assert again is not None
    again.close()
    assert release(tmp_path)


def test_an_image_left_mounted_is_found_below_its_folder_and_not_once_released(
    tmp_path: Path,
) -> None:
    home = tmp_path / "a home"
    home.mkdir()
    volumes = prepare(home, "image", 1024)
    assert volumes is not None
    try:
        assert mounted_under(tmp_path) == [home / "workspaces"]
        assert mounted_under(home / "workspaces") == []
    finally:
        volumes.close()
        assert release(home)
    assert mounted_under(tmp_path) == []
