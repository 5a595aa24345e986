"""Plan then execute: one model call writes a plan, then the tool-calling loop carries it
out step by step through the same tools.

The plan is the turn's first round: a model call shown no tools (the instructions, the
tools the model may call by name, and the turn's message), whose reply is kept as an
assistant message of the turn. From the second round on the turn is the built-in loop's,
told to carry out the plan above; a later wake (an approval, a child's report) goes on
in the loop, since the plan was written already.
"""

from __future__ import annotations

import dataclasses

import msgspec

from schemas.chat import ChatMessage
from schemas.harness import CallModel, Running, TurnState
from schemas.model import ModelReply, ModelRequest
from schemas.spec import granted
from services.harness.loop import Turn, TurnInput, run_turn

PLANNING = (
    "Before you act, write a short numbered plan of the steps that answer the message, one "
    "line a step, naming the tools each step uses. Write only the plan."
)
EXECUTING = "Carry out the plan you wrote above one step at a time, with your tools; then reply."
PLAN_ROUND = 1


def plan_then_execute(given: TurnInput) -> Turn:
    turn = given.turn
    if turn.round == 0 and isinstance(turn.phase, Running):
        command = _plan_call(given, turn)
        reply = yield command
        assert isinstance(reply, ModelReply)
        plan = ChatMessage(role="assistant", content=reply.message.content)
        turn = msgspec.structs.replace(turn, round=PLAN_ROUND, messages=(*turn.messages, plan))
    executing = dataclasses.replace(given, turn=turn, notices=(*given.notices, EXECUTING))
    return (yield from run_turn(executing))


def _plan_call(given: TurnInput, turn: TurnState) -> CallModel:
    spec = turn.spec
    known = granted(spec, (tool.name for tool in given.tools))
    usable = sorted(name for name, policy in known.items() if policy != "deny")
    tools = f"\n\nTools you may use: {', '.join(usable)}." if usable else ""
    notices = "".join(f"\n\n{notice}" for notice in given.notices)
    system = ChatMessage(
        role="system", content=f"{spec.instructions}{notices}{tools}\n\n{PLANNING}"
    )
    messages = (system, *turn.messages)
    request = ModelRequest(
        model=spec.model,
        fallback=spec.fallback,
        local_only=spec.local_only,
        messages=messages,
        max_tokens=spec.limits.max_tokens,
        call_key=f"{given.address}/t{turn.number}/r{PLAN_ROUND}",
        agent=given.address,
        turn=turn.number,
        round=PLAN_ROUND,
    )
    return CallModel(request, prompt_chars=sum(len(m.content) for m in messages))
