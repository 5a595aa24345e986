"""The context engine on a real restate-server: a long-lived agent keeps working, folds
its oldest turns, reads them back with `recall`, and costs the same per round at turn 300
as at turn 30 (journal and state bytes read from `sys_journal`)."""

from __future__ import annotations

import functools
import statistics
from collections.abc import Iterator

import httpx
import msgspec
import pytest

from schemas.events import (
    ContextFolded,
    Event,
    ModelMessage,
    ToolFinished,
    TurnEnded,
    TurnStarted,
    WakeResult,
)
from schemas.spec import AgentSpec, Limits
from schemas.state import StoredAgent
from schemas.wake import Message, WakeEnvelope
from services.agent.store import RECORD
from services.contracts import AGENT, WAKE
from services.executor.scripted import script
from services.harness.recall import RecallAnswer
from services.stack.journal import Journal, RestateAdmin
from services.tools.base import RESULT_LIMIT
from tests.durable.conftest import LiveStack, eventually
from tests.fixtures.models import started_path
from tests.fixtures.tools import bulk_text

pytestmark = pytest.mark.durable

LIMITS = Limits(context_window=1500, max_tokens=64)
SPEC = AgentSpec(kind="long", instructions="Answer at length.", model="script", limits=LIMITS)


@pytest.fixture(scope="module")
def admin(stack: LiveStack) -> Iterator[RestateAdmin]:
    with RestateAdmin(stack.settings.admin_url) as client:
        client.retain_journals([AGENT])
        yield client


def long_reply(turn: int) -> str:
    return f"Reply {turn}: " + " ".join(f"w{turn}x{i}" for i in range(80))


def say(stack: LiveStack, address: str, text: str, spec: AgentSpec = SPEC) -> str:
    """One turn, which must succeed; returns the wake's invocation id."""
    answer = httpx.post(
        f"{stack.settings.ingress_url}{WAKE.path(address)}",
        content=msgspec.json.encode(WakeEnvelope(Message(text, spec=spec))),
        headers={"content-type": "application/json"},
        timeout=120.0,
    )
    assert answer.status_code == 200, answer.text
    result = msgspec.json.decode(answer.content, type=WakeResult)
    assert result.status.last_outcome == "succeeded", result
    return answer.headers["x-restate-id"]


def state_read(journal: Journal) -> int:
    return sum(
        e.raw_length for e in journal.entries if e.entry_type == "Notification: GetLazyState"
    )


def bodies(events: list[Event], kind: type) -> list[Event]:
    return [e for e in events if isinstance(e.body, kind)]


def test_three_hundred_turns_fold_and_cost_the_same_per_round(
    stack: LiveStack, admin: RestateAdmin, address: str
) -> None:
    journal_bytes: dict[int, int] = {}
    state_bytes: dict[int, int] = {}
    for turn in range(1, 301):
        invocation = say(stack, address, script({"reply": long_reply(turn)}))
        if 21 <= turn <= 30 or 291 <= turn <= 300:
            journal = admin.journal(invocation)
            journal_bytes[turn], state_bytes[turn] = journal.size.bytes, state_read(journal)
    events = stack.events(address)
    ended = bodies(events, TurnEnded)
    assert len(ended) == 300
    assert all(e.body.outcome == "succeeded" for e in ended)  # type: ignore[union-attr]
    folds = bodies(events, ContextFolded)
    assert len(folds) >= 30
    early = [journal_bytes[t] for t in range(21, 31)]
    late = [journal_bytes[t] for t in range(291, 301)]
    assert statistics.mean(late) <= 1.2 * statistics.mean(early), (early, late)
    assert max(late) <= 1.2 * max(early), (early, late)
    early_read = [state_bytes[t] for t in range(21, 31)]
    late_read = [state_bytes[t] for t in range(291, 301)]
    assert statistics.mean(late_read) <= 1.2 * statistics.mean(early_read), (early_read, late_read)
    assert max(late_read) <= 1.2 * max(early_read), (early_read, late_read)
    assert_fingerprints_hold_between_folds(events)
    assert_each_segment_is_kept_once(admin, address)
    assert_recall_returns_the_recorded_originals(stack, address, events, folds)


def state(admin: RestateAdmin, address: str) -> dict[str, str]:
    """The agent's object state, key by key, as Restate holds it."""
    rows = admin.query(
        "SELECT key, value_utf8 FROM state"  # noqa: S608 - an address the test made
        f" WHERE service_name = '{AGENT}' AND service_key = '{address}'"
    )
    return {str(row["key"]): str(row["value_utf8"]) for row in rows}


def assert_each_segment_is_kept_once(admin: RestateAdmin, address: str) -> None:
    """A segment the prompt shows verbatim is kept in the record's copy only; one a fold
    moved past has a key of its own."""
    kept = state(admin, address)
    stored = msgspec.json.decode(kept[RECORD], type=StoredAgent)
    context, copy = stored.record.context, stored.recent
    assert context.folded > 0
    keyed = sorted(int(key.removeprefix("history.")) for key in kept if key.startswith("history."))
    assert keyed == list(range(context.folded))
    assert copy is not None
    assert copy.indices == range(context.folded, context.segments)


def assert_fingerprints_hold_between_folds(events: list[Event]) -> None:
    """Between two folds every round shows the same L0 and L1 bytes; a fold keeps L0."""
    prints: list[tuple[str, str]] = []
    runs: list[set[str]] = [set()]
    for event in events:
        if isinstance(event.body, ContextFolded):
            runs.append(set())
        elif isinstance(event.body, ModelMessage):
            prints.append((event.body.fingerprint, event.body.folds_fingerprint))
            runs[-1].add(event.body.folds_fingerprint)
    assert all(len(run) <= 1 for run in runs), "L1 changed without a fold"
    after_first_fold = [p for p, _ in prints[-200:]]
    assert len(set(after_first_fold)) == 1, "L0 changed"
    assert len({f for run in runs for f in run}) > 10


def assert_recall_returns_the_recorded_originals(
    stack: LiveStack, address: str, events: list[Event], folds: list[Event]
) -> None:
    folded_turn = folds[3].body.first_turn  # type: ignore[union-attr]
    recorded = [
        e.body.text for e in events if e.turn == folded_turn and isinstance(e.body, ModelMessage)
    ]
    text = script(
        {"calls": [{"name": "recall", "arguments": {"turn": folded_turn}}]},
        {"reply": "recalled"},
    )
    say(stack, address, text)
    finished = bodies(stack.events(address), ToolFinished)[-1].body
    assert isinstance(finished, ToolFinished)
    assert finished.status == "ok", finished.content
    recalled = msgspec.json.decode(finished.content, type=RecallAnswer)
    messages = recalled.turns[0].messages
    assert [m.content for m in messages if m.role == "assistant"] == recorded
    asked = next(
        e.body for e in events if e.turn == folded_turn and isinstance(e.body, TurnStarted)
    )
    assert isinstance(asked, TurnStarted)
    assert messages[0].content == asked.text


def test_a_failing_summarizer_still_folds_with_the_extractive_summary(
    stack: LiveStack, address: str
) -> None:
    spec = msgspec.structs.replace(SPEC, summarizer="broken")
    for turn in range(1, 13):
        say(stack, address, script({"reply": long_reply(turn)}), spec)
    folds = bodies(stack.events(address), ContextFolded)
    assert folds
    first = folds[0].body
    assert isinstance(first, ContextFolded)
    assert first.extractive
    assert first.model == ""
    assert "The model 'broken' failed with an unexpected error" in first.reason
    assert "RuntimeError" not in first.reason
    assert first.summary.startswith(f"Turn {first.first_turn}: ")


def test_a_huge_message_and_a_tool_result_past_the_cap_are_cut_and_read_back(
    stack: LiveStack, address: str
) -> None:
    spec = msgspec.structs.replace(SPEC, tools=("bulk",))
    huge = "z" * 200_000
    say(stack, address, huge, spec)
    events = stack.events(address)
    ended = bodies(events, TurnEnded)[-1].body
    assert isinstance(ended, TurnEnded)
    assert ended.reply.startswith("You said: zzz")
    assert "call recall with turn=1, message=0, offset=" in ended.reply
    text = script(
        {"calls": [{"name": "bulk", "arguments": {}}]},
        {"calls": [{"name": "recall", "arguments": {"turn": 2, "message": 2, "offset": 8_000}}]},
        {"reply": "done"},
    )
    say(stack, address, text, spec)
    finished = [e.body for e in bodies(stack.events(address), ToolFinished)]
    bulk, recall = finished[-2], finished[-1]
    assert isinstance(bulk, ToolFinished)
    assert isinstance(recall, ToolFinished)
    kept, marker = bulk.content[:RESULT_LIMIT], bulk.content[RESULT_LIMIT:]
    assert kept == bulk_text(RESULT_LIMIT)
    assert marker.startswith(f"\n[... {1_000_000 - RESULT_LIMIT} more characters cut")
    page = msgspec.json.decode(recall.content, type=RecallAnswer)
    shown = page.turns[0].messages[0]
    assert shown.length == len(bulk.content)
    assert shown.content == bulk.content[8_000 : 8_000 + len(shown.content)]
    earlier = script(
        {"calls": [{"name": "recall", "arguments": {"turn": 1, "message": 0, "offset": 199_990}}]},
        {"reply": "read on"},
    )
    say(stack, address, earlier, spec)
    last = bodies(stack.events(address), ToolFinished)[-1].body
    assert isinstance(last, ToolFinished)
    tail = msgspec.json.decode(last.content, type=RecallAnswer).turns[0].messages[0]
    assert tail.content == "z" * 10


def test_sigkill_during_a_summary_step_leaves_exactly_one_fold(
    stack: LiveStack, address: str
) -> None:
    spec = msgspec.structs.replace(SPEC, summarizer="slow_summary")
    marker = started_path(stack.home)
    marker.unlink(missing_ok=True)
    for turn in range(1, 21):
        stack.ingress.send_wake(address, Message(script({"reply": long_reply(turn)}), spec=spec))
        probe = functools.partial(_ended_or_summarizing, stack, address, turn)
        if eventually(probe, 60, f"turn {turn} to end or to start a summary"):
            break
    else:
        pytest.fail("no fold was started in 20 turns")
    stack.restart_endpoint(kill=True)
    ended = stack.wait_for_turn_end(address, turn)
    assert ended.outcome == "succeeded", ended
    folds = [e.body for e in bodies(stack.events(address), ContextFolded)]
    assert len(folds) == 1, folds
    fold = folds[0]
    assert isinstance(fold, ContextFolded)
    assert fold.model == "slow_summary"
    assert fold.summary.startswith("A slow summary for ")
    assert len(marker.read_text().splitlines()) == 2  # killed once, run again once


def _ended_or_summarizing(stack: LiveStack, address: str, turn: int) -> bool | None:
    """True once a summary step started, False once the turn ended without one."""
    if started_path(stack.home).exists():
        return True
    ended = [e for e in stack.events(address) if e.turn == turn and isinstance(e.body, TurnEnded)]
    return False if ended else None
