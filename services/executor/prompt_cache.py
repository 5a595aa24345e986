"""Per-agent prompt caches on one llama.cpp model.

llama.cpp keeps one evaluated sequence: when agents take turns on one model, each call
would throw away the previous agent's prefix and evaluate its own prompt from the start.
`AgentCache` keeps each recent agent's evaluated prefix (the llama.cpp state of the
sequence, keyed by agent, with the tokens it holds) in a byte-bounded LRU store. When a
call comes from another agent than the one the model holds, the holder's state is saved
and the caller's own prefix is restored, if it shares more with the new prompt than what
the model holds.

A prefix is reused only within one tenant (the first part of an agent's address): what
the model holds for one tenant is cleared before a call of another tenant's agent, unless
that agent's own prefix is restored in its place. Otherwise a tenant could learn another
tenant's prompt token by token from the cached-token count or the time of its calls.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import llama_cpp

from schemas.address import tenant_of


class SequenceState(Protocol):
    """The one sequence a model holds: its tokens, and its state as bytes."""

    def held(self) -> list[int]: ...

    def save(self) -> bytes: ...

    def load(self, tokens: Sequence[int], state: bytes) -> None: ...

    def clear(self) -> None:
        """Hold nothing: the next call evaluates its whole prompt."""
        ...


@dataclass(frozen=True)
class SavedPrefix:
    tokens: tuple[int, ...]
    state: bytes

    @property
    def size(self) -> int:
        return len(self.state) + 4 * len(self.tokens)


class PrefixStore:
    """Saved prefixes by agent, least recently used evicted first to stay in `capacity`
    bytes. A prefix larger than the whole capacity is not kept."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.evictions = 0
        self._items: OrderedDict[str, SavedPrefix] = OrderedDict()
        self._bytes = 0

    @property
    def bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def get(self, agent: str) -> SavedPrefix | None:
        saved = self._items.get(agent)
        if saved is not None:
            self._items.move_to_end(agent)
        return saved

    def put(self, agent: str, saved: SavedPrefix) -> None:
        self.discard(agent)
        if saved.size > self.capacity:
            return
        while self._bytes + saved.size > self.capacity:
            _, evicted = self._items.popitem(last=False)
            self._bytes -= evicted.size
            self.evictions += 1
        self._items[agent] = saved
        self._bytes += saved.size

    def discard(self, agent: str) -> None:
        old = self._items.pop(agent, None)
        if old is not None:
            self._bytes -= old.size


@dataclass
class CacheStats:
    switches: int = 0
    """Calls from another agent than the one the model held."""
    restores: int = 0
    """Switches that loaded the caller's saved prefix."""
    clears: int = 0
    """Switches to another tenant's agent that found nothing of its own to restore."""
    switch_seconds: float = 0.0
    """Time spent saving and restoring states on switches."""
    restored_tokens: list[int] = field(default_factory=list)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    length = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        length += 1
    return length


class AgentCache:
    """Decides, before each call, which evaluated prefix the model should hold."""

    def __init__(self, sequence: SequenceState, store: PrefixStore) -> None:
        self._sequence = sequence
        self.store = store
        self.stats = CacheStats()
        self._holder: str | None = None
        self._forgotten: set[str] = set()
        self._forgetting = threading.Lock()

    def forget(self, agents: Iterable[str]) -> None:
        """Drop what is kept of `agents` (erased): their saved prefixes, and the sequence
        the model holds if it is one of theirs. Done before the model's next call, on the
        thread that makes it, so no call is evaluating the sequence meanwhile."""
        with self._forgetting:
            self._forgotten.update(agents)

    def _drop_forgotten(self) -> None:
        with self._forgetting:
            forgotten, self._forgotten = self._forgotten, set()
        for agent in forgotten:
            self.store.discard(agent)
        if self._holder in forgotten:
            self._sequence.clear()
            self._holder = None

    def prepare(self, agent: str, tokens: Sequence[int]) -> None:
        """Make the model hold the longest prefix of `tokens` it can: what it holds now
        (if it holds it for `agent`'s tenant), or `agent`'s saved prefix; else nothing."""
        if self._forgotten:
            self._drop_forgotten()
        if agent == self._holder:
            return
        started = time.perf_counter()
        held = self._sequence.held()
        previous, self._holder = self._holder, agent
        if previous is not None and held:
            self.store.put(previous, SavedPrefix(tuple(held), self._sequence.save()))
        foreign = previous is not None and tenant_of(previous) != tenant_of(agent)
        usable = [] if foreign else held
        self.stats.switches += 1
        saved = self.store.get(agent)
        if saved is not None and common_prefix(saved.tokens, tokens) > common_prefix(
            usable, tokens
        ):
            self._sequence.load(saved.tokens, saved.state)
            self.stats.restores += 1
            self.stats.restored_tokens.append(len(saved.tokens))
        elif foreign and held:
            self._sequence.clear()
            self.stats.clears += 1
        self.stats.switch_seconds += time.perf_counter() - started


class LlamaSequence:
    """`SequenceState` of sequence 0 of a `llama_cpp.Llama`: its KV cells only, not the
    whole context (logits and output buffers are recomputed by the next evaluation)."""

    SEQ = 0

    def __init__(self, llm: llama_cpp.Llama) -> None:
        self._llm = llm

    def held(self) -> list[int]:
        tokens: list[int] = self._llm.input_ids[: self._llm.n_tokens].tolist()
        return tokens

    def save(self) -> bytes:
        ctx = self._llm.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, self.SEQ)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, self.SEQ)
        return ctypes.string_at(buffer, written)

    def load(self, tokens: Sequence[int], state: bytes) -> None:
        buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if llama_cpp.llama_state_seq_set_data(self._llm.ctx, buffer, len(state), self.SEQ) == 0:
            self._llm.reset()  # type: ignore[no-untyped-call]
            return
        self._llm.input_ids[: len(tokens)] = tokens
        self._llm.n_tokens = len(tokens)
        # The restored logits are not those of the last token: evaluate it again.
        self._llm._requires_eval = True

    def clear(self) -> None:
        # Holding no tokens, the next evaluation shares no prefix and clears the KV cells.
        self._llm.reset()  # type: ignore[no-untyped-call]
