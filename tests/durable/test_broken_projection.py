"""A projection that cannot be written never holds an agent up, and loses nothing: the
wake's last write hands its events to the `Projector` through Restate's ingress, and the
`Projector` writes them once the file can be written again."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.rounds import bench_spec, reply_text, turn_script
from schemas.wake import Message
from tests.durable.conftest import LiveStack, eventually, live_stack, stack_settings

pytestmark = pytest.mark.durable
ADDRESS = "acme.bench.broken-projection"


@pytest.fixture
def broken(tmp_path: Path) -> Iterator[LiveStack]:
    """A stack whose projection file is a directory: SQLite cannot open it."""
    settings = stack_settings(tmp_path / "home")
    (settings.home / "projection.db").mkdir(parents=True)
    with live_stack(settings) as stack:
        yield stack


def test_a_wake_returns_while_the_projection_is_broken_and_its_events_land_later(
    broken: LiveStack,
) -> None:
    started = time.monotonic()
    result = broken.ingress.wake(ADDRESS, Message(turn_script(1, 3), spec=bench_spec(3)))
    assert result.reply == reply_text(1)
    assert time.monotonic() - started < 10, "the wake did not wait for the projection"
    events = broken.events(ADDRESS)
    assert [event.seq for event in events] == list(range(1, len(events) + 1))
    log = (broken.home / "logs" / "endpoint.log").read_text()
    assert f"{ADDRESS}'s events go to the Projector" in log

    shutil.rmtree(broken.home / "projection.db")  # the file can be written again
    shown = eventually(
        lambda: broken.shown(ADDRESS) or None, 60, "the Projector to write the events"
    )
    assert shown == events
