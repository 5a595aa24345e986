"""What the gateway's metrics count over the whole projection (every tenant), and whether
an agent wrote an artifact: one read per scrape, the queries SQLite's (`postgres_timeline`
has PostgreSQL's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiosqlite

Rows = list[tuple[Any, ...]]


@dataclass(frozen=True)
class Tallies:
    turns: Rows
    """(outcome, count) of `turn_ended` events."""
    rounds: tuple[int, int, int, int]
    """`model_message` events, and their prompt, completion and cached tokens."""
    tool_errors: int
    agents: Rows
    """(status, count) of the catalog."""
    models: Rows
    """Per model: calls, prompt and cached tokens, queue and first-token seconds summed,
    tokens per second on average."""
    fallbacks: Rows
    """(model, count) of `model_fallback` events."""


TURNS = (
    "select json_extract(cast(event as text), '$.body.outcome'), count(*) from events"
    " where type = 'turn_ended' group by 1"
)
ROUNDS = (
    "select count(*),"
    " coalesce(sum(json_extract(cast(event as text), '$.body.usage.prompt_tokens')), 0),"
    " coalesce(sum(json_extract(cast(event as text), '$.body.usage.completion_tokens')), 0),"
    " coalesce(sum(json_extract(cast(event as text), '$.body.usage.cached_tokens')), 0)"
    " from events where type = 'model_message'"
)
TOOL_ERRORS = (
    "select count(*) from events where type = 'tool_finished'"
    " and json_extract(cast(event as text), '$.body.status') = 'error'"
)
AGENTS = "select status, count(*) from agents group by status"
MODELS = """
select json_extract(cast(event as text), '$.body.model'), count(*),
  coalesce(sum(json_extract(cast(event as text), '$.body.usage.prompt_tokens')), 0),
  coalesce(sum(json_extract(cast(event as text), '$.body.usage.cached_tokens')), 0),
  coalesce(sum(json_extract(cast(event as text), '$.body.timing.queue_seconds')), 0),
  coalesce(sum(json_extract(cast(event as text), '$.body.timing.first_token_seconds')), 0),
  coalesce(avg(json_extract(cast(event as text), '$.body.timing.tokens_per_second')), 0)
from events where type = 'model_message' group by 1 order by 1
"""
FALLBACKS = """
select json_extract(cast(event as text), '$.body.model'), count(*)
from events where type = 'model_fallback' group by 1 order by 1
"""
ARTIFACT = (
    "select 1 from events where agent = ? and type = 'artifact_written'"
    " and json_extract(cast(event as text), '$.body.sha256') = ? limit 1"
)


async def tallies(db: aiosqlite.Connection) -> Tallies:
    async def rows(sql: str) -> Rows:
        return [tuple(row) for row in await db.execute_fetchall(sql)]

    (rounds,) = await rows(ROUNDS)
    ((errors,),) = await rows(TOOL_ERRORS)
    return Tallies(
        await rows(TURNS),
        (int(rounds[0]), int(rounds[1]), int(rounds[2]), int(rounds[3])),
        int(errors),
        await rows(AGENTS),
        await rows(MODELS),
        await rows(FALLBACKS),
    )


async def wrote_artifact(db: aiosqlite.Connection, agent: str, sha256: str) -> bool:
    return bool(list(await db.execute_fetchall(ARTIFACT, (agent, sha256))))
