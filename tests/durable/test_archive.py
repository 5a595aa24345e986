"""Archiving on a real stack: an archived agent's state leaves Restate (no row of its
`state` table names it) for the archive folder, its catalog row shows it archived, and its
next message, or a read of its timeline, brings it back with its whole history and its
timeline unchanged."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from schemas.events import Event, ModelMessage, TurnEnded
from schemas.lifecycle import ArchiveIdle
from schemas.wake import Message
from services.contracts import AGENT, ARCHIVE, ARCHIVE_IDLE, REBUILD, REBUILD_KEY, UNARCHIVE, Empty
from services.executor.scripted import script
from services.ingress import IngressError
from services.lifecycle.restate_admin import RestateAdminApi
from services.projection.store import AgentRow, ProjectionStore
from tests.durable.conftest import LiveStack, eventually
from tests.durable.test_fork import SPEC

pytestmark = pytest.mark.durable

FIRST = script(
    {"calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "v1"}}]},
    {"reply": "Wrote {results}"},
)


def _state_keys(stack: LiveStack, address: str) -> list[str]:
    with contextlib.closing(RestateAdminApi(stack.settings.admin_url)) as admin:
        rows = admin.query(
            f"select key from state where service_name = '{AGENT}'"  # noqa: S608
            f" and service_key = '{address}'"
        )
    return sorted(str(row["key"]) for row in rows)


def _row(stack: LiveStack, address: str) -> AgentRow | None:
    async def read() -> AgentRow | None:
        store = await ProjectionStore.open(stack.home / "projection.db", readonly=True)
        try:
            return await store.agent(address)
        finally:
            await store.close()

    return asyncio.run(read())


def _prompt(events: list[Event], turn: int) -> int:
    return next(
        e.body.usage.prompt_tokens
        for e in events
        if e.turn == turn and isinstance(e.body, ModelMessage)
    )


def test_an_archived_agent_leaves_restate_and_answers_its_next_message_with_its_history(
    stack: LiveStack, address: str
) -> None:
    stack.ingress.message(address, FIRST, SPEC)
    stack.ingress.message(address, "and then?")
    before, keys = stack.events(address), _state_keys(stack, address)
    copy = stack.home / "archive" / "test" / f"{address}.json"

    moved = stack.ingress.call(ARCHIVE, Empty(), address)

    assert (moved.keys, moved.bytes > 0) == (len(keys), True)
    assert _state_keys(stack, address) == []
    assert copy.is_file()
    assert copy.stat().st_mode & 0o777 == 0o600
    row = _row(stack, address)
    assert row is not None
    assert (row.status, row.last_seq) == ("archived", before[-1].seq)
    assert stack.shown(address) == before

    reply = stack.ingress.message(address, "and then?")

    assert (reply.reply, reply.status.turn) == ("You said: and then?", 3)
    after = stack.events(address)
    assert after[: len(before)] == before
    assert isinstance(after[-1].body, TurnEnded)
    # The whole history is in the prompt: turn 3 sees turns 1 and 2, as turn 2 saw turn 1.
    assert _prompt(after, 3) > _prompt(after, 2) > _prompt(after, 1)
    assert not copy.exists()
    assert set(keys) <= set(_state_keys(stack, address))
    eventually(lambda: ((r := _row(stack, address)) and r.status == "idle") or None, 30, "idle")


def test_a_read_of_an_archived_timeline_is_answered_and_brings_the_agent_back(
    stack: LiveStack, address: str
) -> None:
    stack.ingress.message(address, "hello", SPEC)
    before, keys = stack.events(address), _state_keys(stack, address)
    stack.ingress.call(ARCHIVE, Empty(), address)
    assert _state_keys(stack, address) == []

    assert stack.events(address) == before
    eventually(lambda: _state_keys(stack, address) == keys or None, 30, "the state to come back")
    assert stack.events(address) == before
    assert stack.ingress.call(UNARCHIVE, Empty(), address).keys == 0


def test_a_projection_rebuild_keeps_an_archived_agents_timeline_and_row(
    stack: LiveStack, address: str
) -> None:
    """Its state is in the archive store, not Restate's: the rebuild reads it there, and
    leaves the agent archived."""
    stack.ingress.message(address, FIRST, SPEC)
    stack.ingress.message(address, "and then?")
    live = f"{address}-live"
    stack.ingress.message(live, "hello", SPEC)
    stack.ingress.call(ARCHIVE, Empty(), address)
    before, row = stack.shown(address), _row(stack, address)
    assert row is not None
    assert row.status == "archived"
    path = stack.home / "projection.db"
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)

    stack.ingress.call(REBUILD, Empty(), REBUILD_KEY)

    assert stack.shown(address) == before
    assert stack.shown(live) == stack.events(live)
    assert _row(stack, address) == row
    assert _state_keys(stack, address) == []  # the rebuild did not bring it back
    assert stack.ingress.message(address, "back?").reply == "You said: back?"


def test_archiving_an_agent_with_nothing_in_restate_or_archived_already_is_refused(
    stack: LiveStack, address: str
) -> None:
    with pytest.raises(IngressError) as refused:
        stack.ingress.call(ARCHIVE, Empty(), address)
    assert refused.value.status == 404, refused.value.message
    stack.ingress.message(address, "hello", SPEC)
    stack.ingress.call(ARCHIVE, Empty(), address)
    with pytest.raises(IngressError) as twice:
        stack.ingress.call(ARCHIVE, Empty(), address)
    assert twice.value.status == 409, twice.value.message
    assert f"{address} is archived already" in twice.value.message
    assert stack.ingress.call(UNARCHIVE, Empty(), address).keys > 0


def test_archive_idle_archives_the_tenants_agents_idle_past_the_days_asked(
    stack: LiveStack, address: str
) -> None:
    tenant = "idle"
    quiet, busy = f"{tenant}.quiet-{address[-4:]}", f"{tenant}.busy-{address[-4:]}"
    stack.ingress.message(quiet, "hello", SPEC)
    with pytest.raises(IngressError) as off:
        stack.ingress.call(ARCHIVE_IDLE, ArchiveIdle(), tenant)
    assert off.value.status == 422
    assert "TEASPILL_ARCHIVE_IDLE_DAYS" in off.value.message
    eventually(lambda: _row(stack, quiet) or None, 30, "the catalog row")
    stack.ingress.send_message(busy, Message(script({"sleep": 30, "reply": "late"}), spec=SPEC))
    eventually(lambda: ((r := _row(stack, busy)) and r.status == "running") or None, 60, "busy")
    recent = stack.ingress.call(ARCHIVE_IDLE, ArchiveIdle(days=1), tenant)
    assert (recent.archived, recent.left) == ((), ())

    done = stack.ingress.call(ARCHIVE_IDLE, ArchiveIdle(days=1e-9), tenant)

    assert done.archived == (quiet,)
    assert _state_keys(stack, quiet) == []
    assert _state_keys(stack, busy) != []
    assert stack.ingress.message(quiet, "back?").reply == "You said: back?"
