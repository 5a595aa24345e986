"""Grants, checked by the pipeline on every harness's calls, pure.

A harness decides what to show the model and which calls to make; the pipeline does not
take its word for it: a model call offering a tool the spec does not let the model call
ends the turn, and a tool call the spec does not grant (or one set to `ask` that no person
approved) is refused with a sentence, whichever harness made it.
"""

from __future__ import annotations

from schemas.chat import ToolCall, ToolDefinition
from schemas.harness import AwaitingApproval, TurnState
from schemas.model import ModelRequest
from schemas.spec import AgentSpec, granted, grants
from schemas.workspace import workspace_tools
from services.harness.builtins import RECALL, SPAWN, WAIT
from services.tools.registry import ToolRegistry


def definitions(tools: ToolRegistry, *, network: bool = False) -> tuple[ToolDefinition, ...]:
    """Every tool a spec may grant: the registry's and the workspace tools (`run_command`
    saying whether the spec's sandbox has the network)."""
    return (*tools.definitions(), *workspace_tools(network=network))


class PolicyError(Exception):
    """A call the pipeline will not make; the message is the sentence that ends the turn."""


def check_offered(spec: AgentSpec, request: ModelRequest) -> None:
    """Raises PolicyError when the request shows a tool the model may not call."""
    names = [tool.name for tool in request.tools]
    callable_ = {n for n, p in granted(spec, names).items() if p != "deny"}
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


def _answered(turn: TurnState, call: ToolCall) -> bool:
    phase = turn.phase
    if not isinstance(phase, AwaitingApproval) or phase.approval.call.id != call.id:
        return False
    return bool(phase.approval.answer) or phase.approval.asked is not None
