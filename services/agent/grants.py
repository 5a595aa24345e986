"""Grants, checked by the pipeline on every harness's calls, pure.

A harness decides what to show the model and which calls to make; the pipeline does not
take its word for it: a model call offering a tool the spec does not let the model call
ends the turn, and a tool call the spec does not grant (or one set to `ask` that no person
approved) is refused with a sentence, whichever harness made it; and a spawn past the
spec's bounds (children per turn, depth, the message's agents) is refused as well.
"""

from __future__ import annotations

import msgspec

from schemas.chat import ToolCall, ToolDefinition
from schemas.harness import AwaitingApproval, Spawn, TurnState
from schemas.model import ModelRequest
from schemas.pages import page_granted
from schemas.spec import AgentSpec, granted, grants
from schemas.wake import Message, ParentRef
from schemas.workspace import workspace_tools
from services.harness.builtins import RECALL, SPAWN, WAIT
from services.harness.children import budget_left, depth_limit
from services.tools.registry import ToolRegistry


def definitions(tools: ToolRegistry, *, network: bool = False) -> tuple[ToolDefinition, ...]:
    """Every tool a spec may grant: the registry's and the workspace tools (`run_command`
    saying whether the spec's sandbox has the network)."""
    return (*tools.definitions(), *workspace_tools(network=network))


class PolicyError(Exception):
    """A call the pipeline will not make; the message is the sentence that ends the turn."""


def check_offered(
    spec: AgentSpec, request: ModelRequest, pages: tuple[ToolDefinition, ...] = ()
) -> None:
    """Raises PolicyError when the request shows a tool the model may not call. `pages`:
    the tools the turn's page declared, which the spec grants as `page:NAME`."""
    names = [tool.name for tool in request.tools]
    callable_ = {n for n, p in granted(spec, names).items() if p != "deny"}
    callable_ |= {tool.name for tool in pages if page_granted(spec, tool.name)}
    if spec.can_spawn:
        callable_ |= {SPAWN, WAIT}
    if grants(spec).get(RECALL) != "deny":
        callable_.add(RECALL)
    shown = sorted(set(names) - callable_)
    if shown:
        raise PolicyError(
            f"The harness {spec.harness!r} offered the model {', '.join(shown)}, which the "
            f"spec of kind {spec.kind!r} does not let it call: the model call was not made."
        )


def call_problem(turn: TurnState, call: ToolCall) -> str | None:
    """Why the spec does not let `call` run now, or None: it is not granted, or it is set
    to `ask` and the wake was not begun by a person's answer to this very call."""
    policy = granted(turn.spec, (call.name,)).get(call.name)
    if policy is None or policy == "deny":
        return f"The tool {call.name!r} is not granted to this agent: the call was not run."
    if policy == "ask" and not _answered(turn, call):
        return (
            f"The tool {call.name!r} runs only once a person approves the call, and no one "
            "approved this one: it was not run."
        )
    return None


def spawn_refusal(turn: TurnState, command: Spawn, spawns: int, lent: int) -> str | None:
    """Why the spec's bounds do not let the spawn happen, whichever harness asks for it:
    `spawns` children and `lent` agents of the budget taken by the drive's earlier
    spawns (the turn's counts are as of the drive's start)."""
    limits = turn.spec.limits
    if turn.spawned + spawns >= limits.max_children:
        return f"This turn has already started its limit of {limits.max_children} helpers."
    if command.depth > (deepest := depth_limit(turn)):
        return f"Helpers may not be nested deeper than {deepest} levels."
    if lent + command.budget + 1 > budget_left(turn):
        return (
            "No more helpers may be started: the message this work began with may bring at "
            f"most {limits.max_descendants} agents into being in all, and this agent's share "
            "of them is used up."
        )
    return None


def first_message(command: Spawn, parent: ParentRef, turn: TurnState) -> Message:
    """The message `turn`'s spawn sends its child: its task, with the published kind it
    runs (a composition's stage) or the spec it inherits, and its shares of the bounds
    (the agents and tokens the spawn gave it, the parent's depth bound). A child works
    for the end user its parent's turn works for, and keeps to that user's memory."""
    spec, kind = (None, command.kind) if command.kind else (command.spec, None)
    message = Message(command.task, spec, kind, parent, command.depth, command.budget)
    return msgspec.structs.replace(
        message, tokens=command.tokens, max_depth=depth_limit(turn), user=turn.user
    )


def _answered(turn: TurnState, call: ToolCall) -> bool:
    phase = turn.phase
    if not isinstance(phase, AwaitingApproval) or phase.approval.call.id != call.id:
        return False
    return bool(phase.approval.answer) or phase.approval.asked is not None


def tenant_writes(turn: TurnState) -> bool:
    """Whether the turn's `remember` may write tenant-wide memory: a turn without an end
    user may, one an end user's message started only when its spec says so."""
    return not turn.user or turn.spec.memory.tenant_writes
