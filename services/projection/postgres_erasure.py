"""What an erasure reads from the PostgreSQL projection and deletes there: the rows of
one agent and the agents under it, or of a whole tenant, as `erasure.py` does for SQLite."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, LiteralString

from psycopg import AsyncConnection

from services.projection.erasure import Erasable, _ledger_keys, tenant_prefix

Statements = list[tuple[LiteralString, Sequence[tuple[Any, ...]]]]
Transaction = Callable[[Statements], Awaitable[None]]
_UNDER = "(agent = %s or substr(agent, 1, %s) = %s)"
"""The agent `prefix` names, or one under it (`prefix.`...)."""


async def erasable(db: AsyncConnection[tuple[Any, ...]], prefix: str) -> Erasable:
    """As `erasure.erasable`: the agents' addresses, the ledger keys of their tool calls,
    the artifacts no other agent wrote, and how many no other agent of their tenant wrote."""
    under = (prefix, len(prefix) + 1, f"{prefix}.")

    async def rows(statement: LiteralString, *args: object) -> list[tuple[Any, ...]]:
        cursor = await db.execute(statement, args)
        return await cursor.fetchall()

    agents = await rows(
        f"select distinct agent from events where {_UNDER} union select address from agents"  # noqa: S608 - placeholders
        " where address = %s or substr(address, 1, %s) = %s",
        *under, *under,
    )  # fmt: skip
    calls = await rows(
        "select agent, turn, event->>'round', event->'body'->>'call_id' from events"  # noqa: S608 - placeholders
        f" where type = 'tool_called' and {_UNDER}",
        *under,
    )
    asked = await rows(
        "select agent, turn, event->'body'->>'call_id', count(*) from events"  # noqa: S608 - placeholders
        f" where type = 'approval_requested' and {_UNDER} group by 1, 2, 3",
        *under,
    )
    artifacts = await rows(
        "select distinct e.event->'body'->>'sha256' from events e"
        " where e.type = 'artifact_written'"
        " and (e.agent = %s or substr(e.agent, 1, %s) = %s)"
        " and not exists (select 1 from events o where o.type = 'artifact_written'"
        " and not (o.agent = %s or substr(o.agent, 1, %s) = %s)"
        " and o.event->'body'->>'sha256' = e.event->'body'->>'sha256')",
        *under, *under,
    )  # fmt: skip
    tenant = tenant_prefix(prefix)
    written = await rows(
        "select count(distinct e.event->'body'->>'sha256') from events e"
        " where e.type = 'artifact_written'"
        " and (e.agent = %s or substr(e.agent, 1, %s) = %s)"
        " and not exists (select 1 from events o where o.type = 'artifact_written'"
        " and substr(o.agent, 1, %s) = %s and not (o.agent = %s or substr(o.agent, 1, %s) = %s)"
        " and o.event->'body'->>'sha256' = e.event->'body'->>'sha256')",
        *under, len(tenant), tenant, *under,
    )  # fmt: skip
    counted = await rows(
        "select count(*), count(distinct case when type = 'turn_started' then agent end)"  # noqa: S608 - placeholders
        f" from events where {_UNDER}",
        *under,
    )
    return Erasable(
        tuple(sorted(str(r[0]) for r in agents)),
        _ledger_keys(calls, asked),
        tuple(sorted(str(r[0]) for r in artifacts if r[0])),
        int(counted[0][0]),
        int(counted[0][1]),
        int(written[0][0]),
    )


async def erase(transaction: Transaction, prefix: str, tenant: str | None) -> list[str]:
    """Delete every row of the agents `prefix` names and their own memories (and, for a
    `tenant`, its specs, keys, every memory and every document) in one transaction; the
    tables it deleted from, to vacuum."""
    under = (prefix, len(prefix) + 1, f"{prefix}.")
    statements: Statements = [
        ("delete from events where agent = %s or substr(agent, 1, %s) = %s", [under]),
        ("delete from agents where address = %s or substr(address, 1, %s) = %s", [under]),
        (
            "delete from memories where scope = 'agent'"
            " and (owner = %s or substr(owner, 1, %s) = %s)",
            [under],
        ),
    ]
    tables = ["events", "agents", "memories"]
    if tenant is not None:
        for table in ("specs", "keys", "memories", "passages", "documents"):
            statements.append((f"delete from {table} where tenant = %s", [(tenant,)]))  # noqa: S608
            tables.append(table)
    await transaction(statements)
    return tables
