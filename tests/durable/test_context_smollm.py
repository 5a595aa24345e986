"""The context engine with the real bundled SmolLM2 at a 1,024-token window: a long chat
never fails, folds happen and show in `teaspill tail`, and the rounds right after a fold
still reuse the prompt cache for the prefix the fold left unchanged."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest

from schemas.chat import ChatMessage
from schemas.events import ContextFolded, Event, ModelMessage, TurnEnded
from schemas.model import ModelRequest
from schemas.spec import AgentSpec
from services.cli.talk import EXAMPLE_SPEC, print_events
from services.executor.llama import LlamaExecutor, bundled_model_path
from services.executor.prompt_cache import common_prefix
from services.harness.builtins import RECALL_DEFINITION
from services.specs import load_spec
from services.stack import isolated_settings
from tests.durable.conftest import LiveStack, live_stack

pytestmark = [pytest.mark.durable, pytest.mark.model]

WINDOW = 1024
TURNS = 60
# The example agent a new user chats with (at most 4 rounds a turn), with short replies
# so that the run stays within minutes on two cores.
EXAMPLE = load_spec(EXAMPLE_SPEC)
SPEC = msgspec.structs.replace(
    EXAMPLE, limits=msgspec.structs.replace(EXAMPLE.limits, max_tokens=48)
)
QUESTIONS = (
    "Tell me something about the sea.",
    "What did you just say, in one sentence?",
    "Name a colour and a fruit.",
    "What was the first thing I asked you today?",
    "Why is the sky blue?",
    "Give me a short tip for cooking rice.",
)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    home: Path = tmp_path_factory.mktemp("small-window")
    with live_stack(isolated_settings(home, model_context=WINDOW)) as live:
        yield live


def prefix_tokens(spec: AgentSpec) -> int:
    """Tokens of L0 once `recall` is shown (the instructions and the tool, as the llama.cpp
    executor renders them) up to the next turn's opening marker: what a round can take
    from the prompt cache whenever its L0 is the one the model held before."""
    executor = LlamaExecutor(bundled_model_path(), n_ctx=512, n_threads=1)
    system = ChatMessage(role="system", content=spec.instructions)
    alone = ModelRequest(model=spec.model, messages=(system,), tools=(RECALL_DEFINITION,))
    asked = msgspec.structs.replace(alone, messages=(system, ChatMessage(role="user", content="x")))
    return common_prefix(executor.tokenize(alone), executor.tokenize(asked))


def after_folds(events: list[Event]) -> list[tuple[ModelMessage, ModelMessage]]:
    """For each fold, the model message before it and the one right after it."""
    pairs: list[tuple[ModelMessage, ModelMessage]] = []
    before: ModelMessage | None = None
    folded = False
    for event in events:
        if isinstance(event.body, ContextFolded):
            folded = True
        elif isinstance(event.body, ModelMessage):
            if folded and before is not None:
                pairs.append((before, event.body))
            before, folded = event.body, False
    return pairs


def cached_share(messages: list[ModelMessage]) -> float:
    prompt = sum(m.usage.prompt_tokens for m in messages)
    return sum(m.usage.cached_tokens for m in messages) / prompt if prompt else 0.0


@pytest.mark.timeout(3600)
def test_sixty_turns_of_smollm2_at_a_1024_token_window(
    small: LiveStack,
    address: str,
    capsys: pytest.CaptureFixture[str],
    record_property: Callable[[str, object], None],
) -> None:
    for turn in range(1, TURNS + 1):
        answer = small.ingress.message(address, QUESTIONS[turn % len(QUESTIONS)], SPEC)
        assert answer.status.last_outcome == "succeeded", (turn, answer)
        assert not answer.reply.lstrip().startswith('{"tool"'), (turn, answer.reply)
    events = small.events(address)
    ended = [e.body for e in events if isinstance(e.body, TurnEnded)]
    assert [e.outcome for e in ended] == ["succeeded"] * TURNS
    folds = [e.body for e in events if isinstance(e.body, ContextFolded)]
    assert folds
    calls = [e.body for e in events if isinstance(e.body, ModelMessage)]
    assert all(0 < c.usage.prompt_tokens + SPEC.limits.max_tokens <= WINDOW for c in calls)

    # The round right after a fold, where the fold left L0 as it was (every fold but one
    # that first shows `recall`), takes at least L0 from the cache, although the fold's
    # summary step ran on the same model in between.
    l0 = prefix_tokens(SPEC)
    pairs = after_folds(events)
    kept = [after for before, after in pairs if after.fingerprint == before.fingerprint]
    assert kept, "no fold left L0 unchanged"
    assert [m.usage.cached_tokens >= l0 for m in kept] == [True] * len(kept), (
        l0,
        [(m.usage.cached_tokens, m.usage.prompt_tokens) for m in kept],
    )
    later = calls[calls.index(pairs[0][1]) :]
    figures = {
        "folds": len(folds),
        "model rounds": len(calls),
        "L0 tokens": l0,
        "cached share, rounds right after a fold (L0 unchanged)": round(cached_share(kept), 3),
        "cached share, every round from the first fold on": round(cached_share(later), 3),
    }
    for name, value in figures.items():
        record_property(name, value)

    # `teaspill tail` shows each fold (its printer, on the timeline read back from the
    # agent; this stack has no gateway): the turns it covers and its summary.
    capsys.readouterr()
    print_events(events)
    lines = [line for line in capsys.readouterr().out.splitlines() if " folded turn" in line]
    assert len(lines) == len(folds)
    for line, fold in zip(lines, folds, strict=True):
        covered = (
            f"turn {fold.first_turn}"
            if fold.first_turn == fold.last_turn
            else f"turns {fold.first_turn}-{fold.last_turn}"
        )
        assert f"folded {covered} (" in line
        assert " ".join(fold.summary.split())[:40] in line
