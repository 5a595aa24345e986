"""Children, for every harness: the bounds a spawn must keep (children per turn, depth,
the agents one message may bring into being), the share of them a child gets, and a
child's report recorded on the turn that spawned it."""

from __future__ import annotations

import msgspec

from schemas.chat import ChatMessage
from schemas.harness import TurnState
from schemas.model import Usage
from schemas.wake import ChildReport


def budget_left(turn: TurnState) -> int:
    """The agents this turn and its descendants may still bring into being: every agent
    made is taken from exactly one turn's budget, so a message never makes more than its
    spec's `max_descendants`, however its children run."""
    whole = turn.spec.limits.max_descendants
    return whole if turn.budget is None else min(turn.budget, whole)


def spawn_problem(turn: TurnState, wanted: int = 1) -> str | None:
    """Why the turn may not start `wanted` children more, or None."""
    limits = turn.spec.limits
    if turn.spawned + wanted > limits.max_children:
        if wanted == 1:
            return f"This turn has already started its limit of {limits.max_children} helpers."
        return (
            f"The turn would start {turn.spawned + wanted} agents, past its limit of "
            f"{limits.max_children} (limits.max_children)."
        )
    if turn.depth + 1 > (deepest := depth_limit(turn)):
        return f"Helpers may not be nested deeper than {deepest} levels."
    if budget_left(turn) < wanted:
        return (
            "No more helpers may be started: the message this work began with may bring "
            f"at most {limits.max_descendants} agents into being in all, and this agent's "
            "share of them is used up."
        )
    return None


def depth_limit(turn: TurnState) -> int:
    """How deep the turn's descendants may go: its spec's `max_depth`, or its parent's
    bound, whichever is less."""
    own = turn.spec.limits.max_depth
    return own if turn.max_depth is None else min(own, turn.max_depth)


def token_limit(turn: TurnState) -> int:
    """The model tokens the turn may use: its spec's `max_turn_tokens` or the share its
    composing parent gave it, whichever is less; 0 for no limit."""
    own, share = turn.spec.limits.max_turn_tokens, turn.tokens
    if share is None:
        return own
    return min(own, share) if own else max(share, 1)


def share_of(left: int) -> int:
    """A new child's share of what is left: half of it, once the child exists."""
    return (left - 1) // 2


def child_reported(turn: TurnState, report: ChildReport) -> TurnState:
    """Record a child's report on the turn that spawned it; a composition keeps the report
    itself and counts the child's tokens as its own."""
    pending = tuple(c for c in turn.pending if c.address != report.child)
    message = ChatMessage(
        role="tool",
        name="child_report",
        tool_call_id=report.call_id,
        content=f"Helper {report.child} finished ({report.outcome}): {report.reply}",
    )
    turn = msgspec.structs.replace(turn, pending=pending, messages=(*turn.messages, message))
    if turn.spec.composition is None:
        return turn
    usage = turn.usage
    used = Usage(
        usage.prompt_tokens + report.usage.prompt_tokens,
        usage.completion_tokens + report.usage.completion_tokens,
        usage.cached_tokens + report.usage.cached_tokens,
    )
    return msgspec.structs.replace(turn, reports=(*turn.reports, report), usage=used)


def is_pending(turn: TurnState, child: str) -> bool:
    return any(c.address == child for c in turn.pending)
