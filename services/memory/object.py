"""The `Memory` virtual object: the one writer of one scope's records (keyed by
`MemoryScope.key`), each record under a state key of its own, each write handed to the
`Projector` (which indexes it) before the answer, so a record is searchable once
remembered and gone from the search once forgotten; `records` (shared) pages through
them for a rebuild of the index. `remember` answers the record without its text: Restate
keeps the answer of a request sent with an idempotency key for a day, a forgotten
record's too. Nothing is remembered once the tenant's erasure has begun (410), however
late a request sent before it runs."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import restate

from schemas.memory import (
    MAX_MEMORY_CHARS,
    MemoryAnswer,
    MemoryForgotten,
    MemoryNote,
    MemoryPage,
    MemoryRecord,
    MemoryRecords,
    MemoryRef,
    MemoryScope,
)
from services.contracts import (
    FORGET_MEMORIES,
    FORGET_MEMORY,
    MEMORY,
    MEMORY_RECORDS,
    PROJECT_FORGOTTEN,
    PROJECT_MEMORY,
    REMEMBER,
)
from services.durable import NO_JOURNAL, call
from services.lifecycle.tombstone import refuse_if_erased

RECORD = "m."
"""The prefix of a record's state key; the rest is its id."""
MAX_PAGE = 500

memory = restate.VirtualObject(
    MEMORY, description="One scope's memory records.", journal_retention=NO_JOURNAL
)
"""Its journals hold the records' text: none is kept once an invocation finished."""


def problem(note: MemoryNote, key: str) -> str:
    if note.scope.key != key:
        return "This memory object holds another scope."
    if not note.text.strip():
        return "A memory needs some text."
    if len(note.text) > MAX_MEMORY_CHARS:
        return (
            f"A memory holds at most {MAX_MEMORY_CHARS} characters; this one has {len(note.text)}."
        )
    return ""


@memory.handler(name=REMEMBER.name)
async def remember(ctx: restate.ObjectContext, note: MemoryNote) -> MemoryAnswer:
    wrong = problem(note, ctx.key())
    if wrong:
        return MemoryAnswer(problem=wrong)
    await refuse_if_erased(ctx, note.scope.tenant)
    at = datetime.fromtimestamp(await ctx.time(), UTC)
    record = MemoryRecord(f"mem{ctx.uuid().hex[:20]}", note.scope, note.kind, note.text, at)
    ctx.set(RECORD + record.id, record)
    await call(ctx, PROJECT_MEMORY, record, key=note.scope.tenant)
    return MemoryAnswer(msgspec.structs.replace(record, text=""))


@memory.handler(name=FORGET_MEMORY.name)
async def forget(ctx: restate.ObjectContext, ref: MemoryRef) -> MemoryAnswer:
    record = await ctx.get(RECORD + ref.id, type_hint=MemoryRecord)
    if record is None:
        return MemoryAnswer(found=False)
    ctx.clear(RECORD + ref.id)
    await call(
        ctx, PROJECT_FORGOTTEN, MemoryForgotten(record.scope, (ref.id,)), key=record.scope.tenant
    )
    return MemoryAnswer()


@memory.handler(name=FORGET_MEMORIES.name)
async def forget_all(ctx: restate.ObjectContext, scope: MemoryScope) -> MemoryAnswer:
    if scope.key != ctx.key():
        return MemoryAnswer(problem="This memory object holds another scope.")
    ctx.clear_all()
    await call(ctx, PROJECT_FORGOTTEN, MemoryForgotten(scope, everything=True), key=scope.tenant)
    return MemoryAnswer()


@memory.handler(name=MEMORY_RECORDS.name, kind="shared")
async def records(ctx: restate.ObjectSharedContext, page: MemoryPage) -> MemoryRecords:
    after = RECORD + page.after
    names = sorted(n for n in await ctx.state_keys() if n.startswith(RECORD) and n > after)
    limit = max(min(page.limit, MAX_PAGE), 1)
    found = [await ctx.get(name, type_hint=MemoryRecord) for name in names[:limit]]
    return MemoryRecords(tuple(r for r in found if r is not None), more=len(names) > limit)
