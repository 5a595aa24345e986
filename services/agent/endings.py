"""How a drive of a turn ended, and the agent's status after a wake: small pure helpers of
the driver."""

from __future__ import annotations

from schemas.events import AgentStatus, ArtifactWritten, Outcome
from schemas.harness import Command, Fail, Reply, ToolResult
from schemas.state import AgentRecord, TimelineMark
from services.agent.machine import state_of


def status(address: str, record: AgentRecord, mark: TimelineMark, *, running: bool) -> AgentStatus:
    """The agent's status, its state derived from the turn's phase by `state_of`."""
    return AgentStatus(
        address=address,
        state="running" if running else state_of(record.turn, paused=record.paused),
        turn=record.turns,
        last_seq=mark.last_seq,
        last_outcome=record.last_outcome,
        queued=len(record.queue),
        tokens_day=record.ledger.day,
        tokens_used=record.ledger.day_tokens,
    )


def ending(last: Command) -> tuple[Outcome, str] | None:
    """The ending the harness's last command makes: a reply or a failure; None when the
    turn waits."""
    if isinstance(last, Reply):
        return "succeeded", last.text
    if isinstance(last, Fail):
        return "failed", last.reason
    return None


def kept(call_id: str, result: ToolResult) -> tuple[ArtifactWritten, ...]:
    return tuple(ArtifactWritten(call_id, a.path, a.size, a.sha256) for a in result.artifacts)
