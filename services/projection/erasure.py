"""What an erasure reads from the projection and deletes there (the projector's writer
only): the rows of one agent and the agents under it, or of a whole tenant."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import aiosqlite

from schemas.effects import leg_key
from services.projection import knowledge

Statements = list[tuple[str, Sequence[tuple[Any, ...]]]]
Transaction = Callable[[Statements], Awaitable[None]]
"""Runs the statements in one transaction (`ProjectionStore`'s)."""


@dataclass(frozen=True)
class Erasable:
    agents: tuple[str, ...]
    idempotency_keys: tuple[str, ...]
    artifacts: tuple[str, ...]
    events: int
    started: int
    """How many of the agents started a turn."""
    written: int = 0
    """How many artifacts no other agent of their tenant wrote: what an erasure reports.
    `artifacts` leaves out those an agent of another tenant wrote too (the store keeps
    one file per content), and this count does not, so it says nothing of other tenants."""


async def erasable(db: aiosqlite.Connection, prefix: str) -> Erasable:
    """What the projection holds of the agents `prefix` names (one agent and the agents
    under it, or a whole tenant): their addresses, the ledger keys of their tool calls,
    and the artifacts no other agent wrote."""
    under = (prefix, len(prefix) + 1, f"{prefix}.")
    where = "(agent = ? or substr(agent, 1, ?) = ?)"
    agents = await db.execute_fetchall(
        f"select distinct agent from events where {where}"  # noqa: S608
        " union select address from agents where address = ? or substr(address, 1, ?) = ?",
        (*under, *under),
    )
    calls = await db.execute_fetchall(
        f"select agent, turn, json_extract(cast(event as text), '$.round'),"  # noqa: S608
        " json_extract(cast(event as text), '$.body.call_id') from events"
        f" where type = 'tool_called' and {where}",
        under,
    )
    asked = await db.execute_fetchall(
        "select agent, turn, json_extract(cast(event as text), '$.body.call_id'),"  # noqa: S608
        f" count(*) from events where type = 'approval_requested' and {where}"
        " group by 1, 2, 3",
        under,
    )
    artifacts = await db.execute_fetchall(
        "select distinct json_extract(cast(event as text), '$.body.sha256') from events e"  # noqa: S608
        f" where type = 'artifact_written' and {where.replace('agent', 'e.agent')}"
        " and not exists (select 1 from events o where o.type = 'artifact_written'"
        " and not (o.agent = ? or substr(o.agent, 1, ?) = ?) and"
        " json_extract(cast(o.event as text), '$.body.sha256')"
        " = json_extract(cast(e.event as text), '$.body.sha256'))",
        (*under, *under),
    )
    tenant = tenant_prefix(prefix)
    written = await db.execute_fetchall(
        "select count(distinct json_extract(cast(e.event as text), '$.body.sha256'))"  # noqa: S608
        f" from events e where type = 'artifact_written' and {where.replace('agent', 'e.agent')}"
        " and not exists (select 1 from events o where o.type = 'artifact_written'"
        " and substr(o.agent, 1, ?) = ? and not (o.agent = ? or substr(o.agent, 1, ?) = ?)"
        " and json_extract(cast(o.event as text), '$.body.sha256')"
        " = json_extract(cast(e.event as text), '$.body.sha256'))",
        (*under, len(tenant), tenant, *under),
    )
    count = await db.execute_fetchall(
        f"select count(*), count(distinct case when type = 'turn_started' then agent end)"  # noqa: S608
        f" from events where {where}",
        under,
    )
    return Erasable(
        tuple(sorted(str(r[0]) for r in agents)),
        _ledger_keys(calls, asked),
        tuple(sorted(str(r[0]) for r in artifacts if r[0])),
        int(next(iter(count))[0]),
        int(next(iter(count))[1]),
        int(next(iter(written))[0]),
    )


def tenant_prefix(prefix: str) -> str:
    """`tenant.`, the start of every address of the tenant `prefix` (an address, or the
    tenant itself) is in."""
    return f"{prefix.partition('.')[0]}."


async def erase(
    db: aiosqlite.Connection, transaction: Transaction, prefix: str, tenant: str | None
) -> None:
    """Delete every row of the agents `prefix` names, their own memories (and, for a
    `tenant`, its specs, keys, every memory and every document), `securely`."""
    under = (prefix, len(prefix) + 1, f"{prefix}.")
    statements: Statements = [
        ("delete from events where agent = ? or substr(agent, 1, ?) = ?", [under]),
        ("delete from agents where address = ? or substr(address, 1, ?) = ?", [under]),
    ]
    statements.append((AGENT_MEMORIES, [under]))
    if tenant is not None:
        statements += [
            ("delete from specs where tenant = ?", [(tenant,)]),
            ("delete from keys where tenant = ?", [(tenant,)]),
            ("delete from memories where tenant = ?", [(tenant,)]),
            *((statement, [(tenant,)]) for statement in knowledge.DELETE_TENANT),
        ]
    await securely(db, transaction, statements)


AGENT_MEMORIES = (
    "delete from memories where scope = 'agent' and (owner = ? or substr(owner, 1, ?) = ?)"
)
OPTIMIZE = (
    "insert into memory_text (memory_text) values ('optimize')",
    knowledge.OPTIMIZE,
)
"""Merge each full-text index into one segment, leaving out what deleted rows held."""


async def securely(
    db: aiosqlite.Connection, transaction: Transaction, statements: Statements
) -> None:
    """Run `statements` overwriting what they delete (`secure_delete`), merge the
    full-text indexes so no segment keeps a deleted record's words, then checkpoint the
    WAL so no copy of the pages is left in it."""
    await db.execute_fetchall("pragma secure_delete = on")
    try:
        await transaction([*statements, *((optimize, [()]) for optimize in OPTIMIZE)])
    finally:
        await db.execute_fetchall("pragma secure_delete = off")
    await db.execute_fetchall("pragma wal_checkpoint(truncate)")


def _ledger_keys(calls: Iterable[Sequence[Any]], asked: Iterable[Sequence[Any]]) -> tuple[str, ...]:
    """The idempotency keys of the tool calls (`agent/tTURN/rROUND/CALL`), and of each leg
    a call was sent again with a person's answer: a call asked as many times as its
    `approval_requested` events say, each answer a key of its own (`leg_key`)."""
    legs = {(a, t, c): int(n) for a, t, c, n in asked}
    keys: list[str] = []
    for agent, turn, round_, call in calls:
        key = f"{agent}/t{turn}/r{round_}/{call}"
        keys.append(key)
        keys += [leg_key(key, leg) for leg in range(1, legs.get((agent, turn, call), 0) + 1)]
    return tuple(keys)
