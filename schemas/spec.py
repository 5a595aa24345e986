"""Agent specs: what an agent is told, which model it runs on and what it may use."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import msgspec

from schemas.compose import Composition
from schemas.sandbox import WorkspaceSettings

Policy = Literal["allow", "ask", "deny"]
"""`allow`: the model may call the tool; `ask`: each call waits for a person's approval;
`deny`: the tool is never shown and a call to it is refused."""

WhileBusy = Literal["queue", "interrupt", "steer", "reject"]
"""What a message that arrives while a turn is in progress does: `queue` waits for the
turn to end; `interrupt` stops the turn (as a stop does) and starts its own; `steer` joins
the running turn at its next round boundary, where the model sees it; `reject` is refused
(409) and runs nothing."""


class Limits(msgspec.Struct, frozen=True):
    max_rounds: int = 8
    """Rounds (model call plus its tool calls) one turn may run before it fails."""
    max_tokens: int = 256
    """Completion tokens one model call may produce."""
    max_children: int = 8
    """Children one turn may spawn."""
    max_depth: int = 3
    """How deep a chain of spawned children may go."""
    max_descendants: int = 32
    """Agents one message may bring into being in all: the children of its turn, theirs,
    and so on. Each child gets a share of what is left (`Message.budget`)."""
    max_turn_tokens: int = 0
    """Model tokens (prompt and completion) one turn may use; 0 for no limit."""
    max_turn_seconds: float = 0
    """Seconds one turn may spend running (waits excluded); 0 for no limit."""
    max_daily_tokens: int = 0
    """Model tokens the agent may use per UTC day; 0 for no limit."""
    approval_timeout: float = 300
    """Seconds a turn waits for an approval before it is parked."""
    context_window: int = 0
    """Tokens of the model's window the prompt and reply may use; 0 for what the model's
    executor reports (4096 until it has reported)."""
    fold_at: float = 0.75
    """Fold the oldest turns when the prompt would pass this share of the window."""
    fold_to: float = 0.5
    """Fold until the prompt is under this share of the window."""


KIND_PATTERN = r"^[A-Za-z0-9_-]{1,48}$"
DEFAULT_HARNESS = "loop"
COMPOSITION_HARNESS = "composition"
MAX_INSTRUCTIONS = 32768

LIMIT_BOUNDS: dict[str, tuple[float, float]] = {
    "max_rounds": (1, 100),
    "max_tokens": (1, 32768),
    "max_children": (0, 64),
    "max_depth": (0, 10),
    "max_descendants": (0, 1024),
    "max_turn_tokens": (0, 10_000_000),
    "max_turn_seconds": (0, 86_400),
    "max_daily_tokens": (0, 1_000_000_000),
    "approval_timeout": (1, 2_592_000),
    "context_window": (0, 1_048_576),
    "fold_at": (0.05, 1.0),
    "fold_to": (0.05, 1.0),
}
"""The smallest and largest value each limit takes (documented in docs/agents.md)."""

TaskSupport = Literal["forbidden", "optional", "required"]
"""How a kind's MCP tool takes Tasks: `optional`, a call is a task when the client asks for
one; `forbidden`, a call is always answered with its result; `required`, a call must be a
task, and one that is not is refused."""

RESERVED_INPUT = ("agent", "idempotency_key")
"""The arguments every MCP tool of a kind takes besides its input: an input schema may not
declare them."""
MAX_INPUT_SCHEMA = 16_384
"""The most bytes a spec's `input` schema takes, as JSON."""

WHOLE_LIMITS = frozenset(f.name for f in msgspec.structs.fields(Limits) if f.type is int)


class MemorySettings(msgspec.Struct, frozen=True):
    """How the kind's turns use memory (docs/memory.md)."""

    tenant_writes: bool = False
    """Let `remember` write tenant-wide memory (`scope: tenant`) in a turn an end user's
    message started; off, such a write is refused, so what one user says never reaches
    the prompts of the tenant's other users. A turn without an end user may always."""
    extract: bool = False
    """After each turn that succeeded, one more model step asks for the facts worth keeping
    from it, and keeps them (in the end user's scope, else the agent's own)."""


class AgentSpec(msgspec.Struct, frozen=True):
    kind: str
    instructions: str
    model: str = "smollm2"
    fallback: tuple[str, ...] = ()
    """Models to try in order when `model` fails (an error, a timeout, a server gone)."""
    local_only: bool = False
    """Run only on models tagged `local`: a fallback to an `external` model fails the
    turn instead."""
    tools: tuple[str, ...] | dict[str, Policy] = ()
    """The tools the agent is granted: names (each `allow`), or names with their policy.
    The built-in `spawn_agent` and `wait` come with `can_spawn`."""
    can_spawn: bool = False
    limits: Limits = Limits()
    version: int = 0
    """0 for an ad-hoc spec; published versions count from 1 per kind."""
    workspace: WorkspaceSettings = WorkspaceSettings()
    """The workspace's quota, network and command limits (for the workspace tools)."""
    summarizer: str = ""
    """The model that writes fold summaries; empty for the spec's own `model`."""
    while_busy: WhileBusy = "queue"
    """What a message that arrives while a turn is in progress does, when the message
    does not say (`WhileBusy`)."""
    input: dict[str, Any] = {}
    """The JSON schema (an object schema) of the kind's input as an MCP tool: a call's
    arguments are checked against it and sent to the agent as its message, as JSON. Empty:
    the tool takes a `message`."""
    task_support: TaskSupport = "optional"
    """How the kind's MCP tool takes Tasks (`TaskSupport`)."""
    harness: str = DEFAULT_HARNESS
    """The harness that runs the kind's turns, by its registered name: `loop` (the
    built-in tool-calling loop), `plan` (plan then execute), or one a module of
    `TEASPILL_HARNESS_MODULES` registers (docs/harnesses.md)."""
    input_before_task: bool = False
    """For a kind that gathers its input before it works long: an MCP call that would be a
    task first follows the turn's first round, and when that round asks the caller
    something (`ask_user`, an approval) the call answers "input required" instead; the call
    that answers it is the one answered with the task."""
    composition: Composition | None = None
    """Stages of other kinds this kind runs as children, as data (docs/multi-agent.md): a
    spec with one is run by the `composition` harness."""
    memory: MemorySettings = MemorySettings()
    """How its turns use memory: tenant-wide writes in end users' turns, extraction."""


def grants(spec: AgentSpec) -> dict[str, Policy]:
    """Every granted tool with its policy."""
    if isinstance(spec.tools, dict):
        return dict(spec.tools)
    return dict.fromkeys(spec.tools, "allow")


ALL_OF = "/*"
"""A grant ending in it (`mcp:time/*`) grants every tool whose name starts with what is
before it; a tool's own grant wins over it."""


def granted(spec: AgentSpec, known: Iterable[str]) -> dict[str, Policy]:
    """The tools among `known` the spec grants, with their policy."""
    own = grants(spec)
    wide = {name[: -len(ALL_OF)] + "/": p for name, p in own.items() if name.endswith(ALL_OF)}
    found: dict[str, Policy] = {}
    for name in known:
        if name in own:
            found[name] = own[name]
            continue
        for prefix, policy in wide.items():
            if name.startswith(prefix):
                found[name] = policy
                break
    return found


def narrowed(parent: AgentSpec, wanted: list[str] | None) -> AgentSpec:
    """A child's spec: the parent's, with grants cut down to `wanted` (never widened): a
    wanted tool under a whole-server grant (`mcp:time/now` under `mcp:time/*`) is kept
    with that grant's policy."""
    if wanted is None:
        return parent
    kept = {found: p for name in wanted for found, p in granted(parent, (name,)).items()}
    return msgspec.structs.replace(parent, tools=kept)
