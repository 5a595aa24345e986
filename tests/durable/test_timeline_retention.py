"""Timeline retention on a real stack: past TEASPILL_TIMELINE_KEEP_CHUNKS, an agent's older
timeline chunks leave its Restate state for the archive store, and every read still
serves the whole timeline (a page of it, a fork at an early seq, a projection rebuild),
an erasure removes them there too, and a SIGKILL while the archive cannot take them
loses nothing."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from schemas.events import Event, TurnEnded, TurnStarted
from schemas.lifecycle import ErasureRequest, ForkRequest
from schemas.wake import Message
from services.agent.store import RETIRE_BATCH
from services.contracts import AGENT, ERASE_AGENT, FORK, REBUILD, REBUILD_KEY, Empty
from services.lifecycle.restate_admin import RestateAdminApi
from tests.durable.conftest import LiveStack, eventually, live_stack, stack_settings
from tests.durable.test_fork import SPEC

pytestmark = pytest.mark.durable

KEEP = 2
TURNS = KEEP + RETIRE_BATCH
"""One chunk a wake here: the wake of this turn is the first with chunks to retire."""


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    settings = stack_settings(tmp_path_factory.mktemp("home")).model_copy(
        update={"timeline_keep_chunks": KEEP}
    )
    with live_stack(settings) as live:
        yield live


def _chunks_in_state(stack: LiveStack, address: str) -> list[int]:
    with contextlib.closing(RestateAdminApi(stack.settings.admin_url)) as admin:
        rows = admin.query(
            f"select key from state where service_name = '{AGENT}'"  # noqa: S608
            f" and service_key = '{address}' and key like 'timeline.%'"
        )
    return sorted(int(str(row["key"]).removeprefix("timeline.")) for row in rows)


def _failing(stack: LiveStack, invocation: str) -> bool | None:
    """Whether the invocation's last attempt failed in the archive's write."""
    with contextlib.closing(RestateAdminApi(stack.settings.admin_url)) as admin:
        rows = admin.query(
            f"select last_failure from sys_invocation where id = '{invocation}'"  # noqa: S608
        )
    return any("exists" in str(row["last_failure"]).lower() for row in rows) or None


def _retired(stack: LiveStack, address: str) -> Path:
    return stack.home / "archive" / "test" / f"{address}.timeline"


def _in_archive(stack: LiveStack, address: str) -> list[int]:
    folder = _retired(stack, address)
    return sorted(int(p.stem) for p in folder.glob("*.json")) if folder.is_dir() else []


def _whole(events: list[Event], turns: int) -> None:
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    ended = [e.turn for e in events if isinstance(e.body, TurnEnded)]
    assert ended == list(range(1, turns + 1))


def _talk(stack: LiveStack, address: str, turns: range) -> None:
    for turn in turns:
        reply = stack.ingress.message(address, f"turn {turn}", SPEC if turn == 1 else None)
        assert reply.reply == f"You said: turn {turn}"


def _without_agent(events: list[Event]) -> list[bytes]:
    return [msgspec.json.encode(msgspec.structs.replace(e, agent="")) for e in events]


def test_older_chunks_leave_the_state_and_every_read_still_sees_the_whole_timeline(
    kept: LiveStack, address: str
) -> None:
    _talk(kept, address, range(1, TURNS))
    assert _chunks_in_state(kept, address) == list(range(TURNS - 1))
    assert _in_archive(kept, address) == []

    _talk(kept, address, range(TURNS, TURNS + 1))

    assert _chunks_in_state(kept, address) == list(range(TURNS - KEEP, TURNS))
    assert _in_archive(kept, address) == list(range(TURNS - KEEP))
    events = kept.events(address)
    _whole(events, TURNS)
    assert events == kept.shown(address)

    # A fork at an early seq reads the retired part.
    cut = next(e.seq for e in events if e.turn == 2 and isinstance(e.body, TurnStarted)) + 1
    fork = f"{address}-f"
    status = kept.ingress.call(FORK, ForkRequest(address, cut), fork)
    assert status.last_seq == cut + 1
    assert _without_agent(kept.events(fork)[:cut]) == _without_agent(events[:cut])
    assert kept.ingress.message(fork, "again").reply == "You said: again"

    # A projection rebuild reads it too.
    path = kept.home / "projection.db"
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    kept.ingress.call(REBUILD, Empty(), REBUILD_KEY)
    assert kept.shown(address) == events

    # The agent goes on, and its erasure removes the retired chunks as well.
    _talk(kept, address, range(TURNS + 1, TURNS + 3))
    _whole(kept.events(address), TURNS + 2)
    kept.ingress.call(ERASE_AGENT, ErasureRequest(address, by="test"), "test")
    assert not _retired(kept, address).exists()
    assert _chunks_in_state(kept, address) == []


def test_a_sigkill_while_the_archive_cannot_take_the_chunks_loses_nothing(
    kept: LiveStack, address: str
) -> None:
    _talk(kept, address, range(1, TURNS))
    # A file where the chunks' folder goes: the archive refuses them until it is gone.
    blocked = _retired(kept, address)
    blocked.parent.mkdir(parents=True, exist_ok=True)
    blocked.write_text("in the way")
    wake = kept.ingress.send_message(address, Message(f"turn {TURNS}"))

    def ended() -> bool | None:
        shown = kept.shown(address)
        return any(e.turn == TURNS and isinstance(e.body, TurnEnded) for e in shown) or None

    eventually(ended, 60, "the turn's end in the projection")
    eventually(lambda: _failing(kept, wake), 60, "the archive's write to fail")
    # The wake's end retries the archive's write: nothing has left the state.
    assert _chunks_in_state(kept, address) == list(range(TURNS))

    kept.restart_endpoint(kill=True)
    assert _chunks_in_state(kept, address) == list(range(TURNS))
    blocked.unlink()
    result = kept.ingress.attach(wake)

    assert result.reply == f"You said: turn {TURNS}"
    assert _chunks_in_state(kept, address) == list(range(TURNS - KEEP, TURNS))
    assert _in_archive(kept, address) == list(range(TURNS - KEEP))
    events = kept.events(address)
    _whole(events, TURNS)
    assert events == kept.shown(address)
    _talk(kept, address, range(TURNS + 1, TURNS + 2))
    _whole(kept.events(address), TURNS + 1)
