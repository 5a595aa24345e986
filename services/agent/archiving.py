"""Archiving an agent and bringing it back: its `Agent` state leaves Restate for an archive
store, and comes back, key for key, when it is next woken, read or asked back.

- `archive` (exclusive, so no wake runs beside it): refused while a turn is in progress or
  the agent is paused; it reads every key of the agent's state, hands the copy to the
  store (which marks the catalog row archived), then clears the state. The workspace and
  the projection's rows stay where they are.
- `restore`: an agent whose state is empty looks for its copy (one journaled step) and,
  when there is one, writes every key back as it was, then drops the copy. A wake does
  this before it runs, so an archived agent answers its next message with its whole
  history; `unarchive` does it alone; a read of the timeline while archived is answered
  from the copy, and sends `unarchive`.

The values are moved as the bytes Restate holds, so nothing is decoded or re-encoded on
the way: the agent comes back in the layout it left in (`migrations` brings an older one
forward as usual).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import msgspec
import restate

from schemas.events import Event, TimelinePage, TimelineQuery
from schemas.lifecycle import AgentArchive, Archived, StateEntry
from schemas.state import Chunk
from services.agent.store import RAW, RECORD, Reader, Retired
from services.contracts import ARCHIVE, UNARCHIVE, Empty
from services.durable import send, step_options, together

NEVER = datetime.fromtimestamp(0, UTC)


class Archives(Protocol):
    """Where archived agents are kept (`services.lifecycle.archive.Archives`)."""

    async def keep(self, archive: AgentArchive) -> None:
        """Keep the copy whole, and show the agent archived."""

    async def find(self, address: str) -> AgentArchive | None: ...

    async def restored(self, address: str) -> None:
        """The agent is back in Restate: drop its copy, show it idle."""

    async def retire(self, address: str, first: int, chunks: Sequence[bytes]) -> None:
        """Keep timeline chunks `first`, `first + 1`, ... (their bytes as Restate held
        them), each written whole; writing one again writes the same."""

    async def retired(self, address: str, index: int) -> bytes | None:
        """Retired chunk `index`, if kept."""


def retired_reads(
    ctx: restate.ObjectContext | restate.ObjectSharedContext,
    archives: Archives | None,
    address: str,
) -> Retired:
    """How a handler reads retired chunks: one journaled step each."""

    async def read(index: int) -> Chunk | None:
        if archives is None:
            return None

        async def find() -> Chunk:
            raw = await archives.retired(address, index)
            return msgspec.json.decode(raw, type=Chunk) if raw else Chunk(())

        found = await ctx.run_typed("retired chunk", find, step_options(Chunk))
        return found if found.events else None

    return read


def archive_handlers(
    agent: restate.VirtualObject, archives: Archives, address_of: Callable[[str], str]
) -> None:
    @agent.handler(name=ARCHIVE.name)
    async def archive(ctx: restate.ObjectContext) -> Archived:
        address = address_of(ctx.key())
        return await archived(ctx, archives, address)

    @agent.handler(name=UNARCHIVE.name)
    async def unarchive(ctx: restate.ObjectContext) -> Archived:
        address = address_of(ctx.key())
        if await ctx.get(RECORD, serde=RAW) is not None:
            return Archived(address)
        return await restore(ctx, archives, address)


async def archived(ctx: restate.ObjectContext, archives: Archives, address: str) -> Archived:
    """Move the agent's state to the archive store, and clear it."""
    stored = await Reader(ctx).stored()
    record = stored.record
    if record.turn is not None or record.paused:
        doing = f"turn {record.turn.number} in progress" if record.turn else "been paused"
        raise restate.TerminalError(
            f"{address} has {doing}: an agent is archived only while idle.", 409
        )
    keys = sorted(await ctx.state_keys())
    if not keys and await has_copy(ctx, archives, address):
        raise restate.TerminalError(
            f"{address} is archived already: its next message, or unarchive, brings it back.",
            409,
        )
    if not keys:
        raise restate.TerminalError(f"{address} holds nothing in Restate to archive.", 404)
    reads = [ctx.get(key, serde=RAW) for key in keys]  # type: ignore[arg-type]
    await together(*reads)
    values = [await read for read in reads]
    entries = tuple(
        StateEntry.of(key, value)
        for key, value in zip(keys, values, strict=True)
        if value is not None
    )
    copy = AgentArchive(address, datetime.fromtimestamp(await ctx.time(), UTC), entries)

    async def keep() -> Empty:
        await archives.keep(copy)
        return Empty()

    await ctx.run_typed("archive", keep, step_options(Empty))
    ctx.clear_all()
    return Archived(address, len(entries), sum(len(e.value) for e in entries))


async def restore(ctx: restate.ObjectContext, archives: Archives, address: str) -> Archived:
    """Write the agent's archived state back, if it has a copy (call with its state empty)."""
    found = await _copy(ctx, archives, address)
    for entry in found.entries:
        ctx.set(entry.key, entry.value, serde=RAW)
    if not found.entries:
        return Archived(address)

    async def dropped() -> Empty:
        await archives.restored(address)
        return Empty()

    await ctx.run_typed("restored", dropped, step_options(Empty))
    return Archived(address, len(found.entries), sum(len(e.value) for e in found.entries))


async def has_copy(
    ctx: restate.ObjectContext | restate.ObjectSharedContext, archives: Archives, address: str
) -> bool:
    """Whether the archive store holds a copy of the agent (one journaled step)."""

    async def find() -> bool:
        return await archives.find(address) is not None

    return await ctx.run_typed("archived?", find, step_options(bool))


async def archived_page(
    ctx: restate.ObjectSharedContext, archives: Archives, address: str, query: TimelineQuery
) -> TimelinePage | None:
    """A page of an archived agent's timeline, read from its copy (and `unarchive` sent,
    so it comes back); None when it has none."""
    found = await _copy(ctx, archives, address)
    if not found.entries:
        return None
    send(ctx, UNARCHIVE, Empty(), key=address)
    reader = Reader(_Held(found), retired_reads(ctx, archives, address))  # type: ignore[arg-type]
    events, last_seq = await reader.page(query.after_seq, query.limit)
    return TimelinePage(events=events, last_seq=last_seq)


async def archived_events(
    copy: AgentArchive, retired: Callable[[int], bytes | None]
) -> list[Event]:
    """Every event of the timeline `copy` holds, with its retired chunks (`retired`
    reads one from the archive store), in seq order."""

    async def read(index: int) -> Chunk | None:
        raw = retired(index)
        return msgspec.json.decode(raw, type=Chunk) if raw else None

    reader = Reader(_Held(copy), read)  # type: ignore[arg-type]
    return await reader.events_upto((await reader.mark((await reader.stored()).record)).last_seq)


async def _copy(
    ctx: restate.ObjectContext | restate.ObjectSharedContext, archives: Archives, address: str
) -> AgentArchive:
    async def find() -> AgentArchive:
        return await archives.find(address) or AgentArchive(address, NEVER)

    return await ctx.run_typed("archived", find, step_options(AgentArchive))


class _Held:
    """An archived copy read as the agent's state (the two reads `Reader` makes)."""

    def __init__(self, copy: AgentArchive) -> None:
        self._values = {entry.key: entry.value for entry in copy.entries}

    async def get(self, key: str, serde: Any = None, type_hint: Any = None) -> Any:
        raw = self._values.get(key)
        if raw is None or serde is RAW:
            return raw
        return msgspec.json.decode(raw, type=type_hint)
