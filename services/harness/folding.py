"""Folding, pure: which turns to fold, the summary step's request, and the extractive
summary used when that step fails or writes nothing usable (a fold never fails a turn)."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from schemas.chat import ChatMessage
from schemas.context import ContextState, FoldBlock, Segment
from schemas.model import ModelReply, ModelRequest
from schemas.spec import AgentSpec
from services.harness.context import (
    FOLDS_HEADER,
    MIN_SHOWN,
    SUMMARY_SHARE,
    Budget,
    Estimate,
    Layers,
    kept_blocks,
    shown_messages,
    summary_chars,
)

SUMMARY_INSTRUCTIONS = (
    "You write short, factual summaries of conversations. Keep names, numbers, decisions, "
    "open questions and what the user asked for. Write plain sentences, nothing else."
)
INSTRUCTION_TOKENS = 96
"""Tokens kept for the summary request's own words around the transcript."""


@dataclass(frozen=True)
class FoldPlan:
    segments: tuple[Segment, ...]
    """The oldest verbatim segments, to be folded into one summary."""
    tokens_before: int


def plan_fold(layers: Layers, budget: Budget, estimate: Estimate) -> FoldPlan | None:
    """Fold when the prompt would pass the high mark: the oldest verbatim turns, until
    what is left (with room for the summary) is under the low mark."""
    chars = layers.chars()
    before = estimate.tokens(chars)
    if before <= budget.high or not layers.recent.segments:
        return None
    chars += summary_chars(budget, estimate) + 32
    if layers.folds is None:
        chars += len(FOLDS_HEADER) + 16
    taken: list[Segment] = []
    for segment, size in zip(layers.recent.segments, layers.recent.sizes, strict=True):
        taken.append(segment)
        chars -= size
        if estimate.tokens(chars) <= budget.low:
            break
    return FoldPlan(tuple(taken), before)


def transcript(segments: tuple[Segment, ...], limit: int) -> str:
    lines = []
    for segment in segments:
        for _, message in shown_messages(segment):
            who = message.name or message.role
            lines.append(f"Turn {segment.turn}, {who}: {message.content}")
    text = "\n".join(lines)
    return text if len(text) <= limit else text[:limit] + "\n[...]"


def summary_request(
    address: str,
    spec: AgentSpec,
    plan: FoldPlan,
    *,
    budget: Budget,
    estimate: Estimate,
    label: str,
) -> ModelRequest:
    """The summary step's request, bounded by the window like any other model step."""
    max_tokens = max(int(budget.window * SUMMARY_SHARE), 16)
    room = estimate.chars(max(budget.window - max_tokens - INSTRUCTION_TOKENS, 64))
    first, last = plan.segments[0].turn, plan.segments[-1].turn
    ask = f"Summarize turns {first} to {last} of the conversation above in a few sentences."
    user = ChatMessage(role="user", content=transcript(plan.segments, room) + "\n\n" + ask)
    return ModelRequest(
        model=spec.summarizer or spec.model,
        messages=(ChatMessage(role="system", content=SUMMARY_INSTRUCTIONS), user),
        max_tokens=max_tokens,
        call_key=f"{address}/{label}",
    )


def usable(reply: ModelReply | None, limit: int) -> str | None:
    """The summary a reply gives, cut to `limit`; None when there is none worth keeping."""
    if reply is None or reply.finish_reason == "cancelled" or reply.message.tool_calls:
        return None
    text = " ".join(reply.message.content.split())
    if not text:
        return None
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def extractive(segments: tuple[Segment, ...], limit: int) -> str:
    """A summary made without a model: each turn's request and its last answer, clipped."""
    share = max(limit // (2 * max(len(segments), 1)) - 16, 24)
    lines = []
    for segment in segments:
        asked = next((m.content for m in segment.messages if m.role == "user"), "")
        answered = next(
            (m.content for m in reversed(segment.messages) if m.role == "assistant"), ""
        )
        lines.append(f"Turn {segment.turn}: {_clip(asked, share)} -> {_clip(answered, share)}")
    return _clip(" ".join(lines), max(limit, MIN_SHOWN))


def folded(
    state: ContextState, plan: FoldPlan, summary: str, budget: Budget, estimate: Estimate
) -> ContextState:
    """The state after the fold: the segments marked folded, the block appended."""
    block = FoldBlock(plan.segments[0].turn, plan.segments[-1].turn, summary)
    return msgspec.structs.replace(
        state,
        folded=state.folded + len(plan.segments),
        folds=state.folds + 1,
        blocks=kept_blocks((*state.blocks, block), budget, estimate),
    )
