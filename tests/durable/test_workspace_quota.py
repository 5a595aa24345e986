"""The workspace quota on a real stack with real bwrap: on the workspaces' filesystem (the
btrfs image the endpoint mounts) the kernel stops one command's writes at the quota, while
another agent's turn goes on; in plain folders (a home the image cannot be used in) the
quota is checked after the command, as before."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from schemas.events import TurnEnded
from schemas.sandbox import WorkspaceSettings
from schemas.wake import Message
from services.stack import Stack, StackError, isolated_settings
from tests.durable.conftest import eventually
from tests.durable.test_workspaces import LIMITS, SPEC, Live, calls, start

pytestmark = pytest.mark.durable

QUOTA = msgspec.structs.replace(
    SPEC,
    workspace=WorkspaceSettings(
        quota_mb=2, limits=msgspec.structs.replace(LIMITS, wall_seconds=30, cpu_seconds=20)
    ),
)
MANY_FILES = "python3 -c \"\nfor i in range(100000):\n    open(f'f{i}', 'w').write('x' * 3000)\""
MANY_FOLDERS = "python3 -c \"import os\nfor i in range(1000000): os.mkdir(f'd{i}')\""
BIG = "head -c 3000000 /dev/zero > big && echo written"


def mounted(home: Path) -> bool:
    return os.path.ismount(home / "workspaces")


def turn_end(live: Live, address: str, turn: int) -> TurnEnded:
    def ended() -> TurnEnded | None:
        found = [e.body for e in live.events(address) if isinstance(e.body, TurnEnded)]
        return found[turn - 1] if len(found) >= turn else None

    return eventually(ended, 120, f"turn {turn} of {address} to end")


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A stack whose endpoint must mount the image (`image` mode refuses to start
    without it)."""
    home = tmp_path_factory.mktemp("home")
    with start(home, workspace_disk="image") as live:
        assert mounted(home)
        yield live
    assert not mounted(home), "the stack unmounts the image when it stops"


def test_many_files_and_folders_stop_at_the_quota_and_another_turn_goes_on(
    image: Live,
) -> None:
    address, other = "acme.filler", "acme.neighbour"
    text = calls(("run_command", {"command": MANY_FILES}), ("run_command", {"command": "rm f*"}))
    text_folders = calls(("run_command", {"command": MANY_FOLDERS}))
    started = time.monotonic()
    image.ingress.send_wake(address, Message(text, spec=QUOTA))
    image.ingress.send_wake(f"{address}-folders", Message(text_folders, spec=QUOTA))
    image.ingress.send_wake(
        other, Message(calls(("run_command", {"command": "echo here"})), spec=QUOTA)
    )
    assert image.turn_end(other).outcome == "succeeded"
    assert "here" in image.results(other)[0].content
    neighbour = time.monotonic() - started
    for filler in (address, f"{address}-folders"):
        image.turn_end(filler)
        said = image.results(filler)[0].content
        assert "A write was refused at the workspace's quota" in said, said
        assert "its quota of 2 MB (workspace.quota_mb)" in said
    files = len(list(image.workspace(address).iterdir()))
    assert files * 3000 <= 2 * 2**20
    assert len(list(image.workspace(f"{address}-folders").iterdir())) > 100
    assert image.results(address)[1].status == "ok"  # the files could be removed
    assert neighbour < 30


def test_a_quota_raised_in_a_new_spec_applies_to_the_next_turn(image: Live) -> None:
    address = "acme.grower"
    image.ingress.send_wake(address, Message(calls(("run_command", {"command": BIG})), spec=QUOTA))
    image.turn_end(address)
    assert "its quota of 2 MB" in image.results(address)[0].content
    raised = msgspec.structs.replace(
        QUOTA, workspace=msgspec.structs.replace(QUOTA.workspace, quota_mb=8)
    )
    image.ingress.send_wake(
        address, Message(calls(("run_command", {"command": f"rm big; {BIG}"})), spec=raised)
    )
    ended = turn_end(image, address, 2)
    assert ended.outcome == "succeeded"
    said = image.results(address)[1].content
    assert said.startswith("Exit status 0"), said
    assert (image.workspace(address) / "big").stat().st_size == 3_000_000


def test_a_command_cannot_make_a_subvolume_outside_its_quota(image: Live) -> None:
    address = "acme.nester"
    command = "btrfs subvolume create nested; btrfs subvolume snapshot . snap; ls"
    image.ingress.send_wake(
        address, Message(calls(("run_command", {"command": command})), spec=QUOTA)
    )
    image.turn_end(address)
    said = image.results(address)[0].content
    assert said.count("Inappropriate ioctl for device") == 2, said
    assert not (image.workspace(address) / "nested").exists()
    assert not (image.workspace(address) / "snap").exists()


def test_a_killed_endpoint_leaves_the_mount_and_its_restart_reuses_it(image: Live) -> None:
    address = "acme.survivor"
    write = calls(("run_command", {"command": "echo kept > kept.txt"}))
    image.ingress.send_wake(address, Message(write, spec=QUOTA))
    image.turn_end(address)
    image.stack.endpoint.kill()
    assert mounted(image.home)
    image.stack.endpoint.start()
    read = calls(("run_command", {"command": "cat kept.txt"}))
    image.ingress.send_wake(address, Message(read, spec=QUOTA))
    turn_end(image, address, 2)
    assert "kept" in image.results(address)[1].content


def test_plain_folders_keep_folder_mode_and_the_quota_is_checked_after_the_command(
    tmp_path: Path,
) -> None:
    old = tmp_path / "workspaces" / "acme" / "acme.old"
    old.mkdir(parents=True)
    (old / "notes.txt").write_text("kept")
    with start(tmp_path) as live:
        assert not mounted(tmp_path)
        address = "acme.folders"
        command = "for i in $(seq 3); do head -c 1000000 /dev/zero > f$i; done; echo done"
        live.ingress.send_wake(
            address, Message(calls(("run_command", {"command": command})), spec=QUOTA)
        )
        live.turn_end(address)
        said = live.results(address)[0].content
        assert "past its quota of 2 MB (workspace.quota_mb)" in said, said
        log = (tmp_path / "logs" / "endpoint.log").read_text()
        assert "quota is checked after each command, not by the kernel" in log
        assert "already holds workspaces as plain folders" in log
    assert (old / "notes.txt").read_text() == "kept"
    assert not (tmp_path / "workspaces.img").exists()


def test_image_mode_without_the_image_stops_the_endpoint_with_a_sentence(tmp_path: Path) -> None:
    """Plain folders are never hidden under the image: `image` mode refuses to start."""
    (tmp_path / "workspaces" / "acme" / "acme.old").mkdir(parents=True)
    stack = Stack(isolated_settings(tmp_path, workspace_disk="image"), gateway=False)
    with pytest.raises(StackError) as refused:
        stack.up()
    said = str(refused.value)
    assert "TEASPILL_WORKSPACE_DISK=image, but the workspaces' image cannot be had" in said
    assert "already holds workspaces as plain folders, which a mount would hide" in said
    assert "Traceback" not in said
    assert not mounted(tmp_path)
