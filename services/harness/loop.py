"""The built-in tool-calling loop.

`run_turn` is a generator: it yields a command, the driver performs it and sends back the
result, and so on until the turn replies, fails or waits. It returns the `TurnState` to
keep for the next wake.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field

import msgspec

from schemas.address import child_address, parse_address
from schemas.chat import ChatMessage, ToolCall, ToolDefinition
from schemas.context import ContextState, Segment
from schemas.harness import (
    Arrived,
    AskApproval,
    AwaitingApproval,
    AwaitingChildren,
    Between,
    CallModel,
    CallTool,
    Command,
    Fail,
    PendingApproval,
    PendingChild,
    Recall,
    RecordFold,
    Refuse,
    Reply,
    Result,
    Running,
    Spawn,
    Spawned,
    Summarize,
    Summary,
    Told,
    ToolResult,
    TurnState,
    Wait,
)
from schemas.model import ModelReply, ModelRequest
from schemas.pages import shown_page_tools
from schemas.questions import InputAnswer
from schemas.spec import Policy, granted, grants, narrowed
from services.harness.asking import answer_text, asked_of, asked_together
from services.harness.builtins import ASK_USER, BUILTIN_DEFINITIONS, RECALL, SPAWN, WAIT
from services.harness.children import budget_left, share_of, spawn_problem
from services.harness.context import (
    Budget,
    Current,
    Estimate,
    Fixed,
    Layers,
    Shown,
    assemble,
    layers_of,
    observed,
    shown_history,
    summary_chars,
)
from services.harness.echo import NUDGE, nudge, nudged, read_backs, repeats
from services.harness.folding import extractive, folded, plan_fold, summary_request, usable
from services.harness.recall import refers_back

Turn = Generator[Command, Result, TurnState]


@dataclass(frozen=True)
class TurnInput:
    address: str
    turn: TurnState
    recent: tuple[Segment, ...]
    """The history segments not folded yet (`context.folded` on), oldest first."""
    tools: tuple[ToolDefinition, ...]
    """Definitions of the granted tools the registry knows (built-ins are added here)."""
    context: ContextState = field(default_factory=ContextState)
    notices: tuple[str, ...] = ()
    """Sentences the model reads after its instructions: what the turn cannot offer of
    what its spec grants (an MCP server that could not be listed). They change with the
    tools shown, so the stable prefix changes only when those do."""
    harnesses: Mapping[str, Callable[[TurnInput], Turn]] = field(default_factory=dict)
    """The deployment's harnesses, by name: a handoff goes on in the new kind's."""


class _View(msgspec.Struct, frozen=True):
    """What the prompt shows besides its fixed layer: the history, as the turn's folds
    change it, and the turn's own messages, measured as they are added."""

    state: ContextState
    recent: Shown
    current: Current = msgspec.field(default_factory=Current)
    """As of the round being planned (`_rounds` brings it on each round)."""


@dataclass(frozen=True)
class _L0:
    """The turn's fixed layer with `recall` shown and without: the spec and the tools do
    not change within a turn, so both are worked out once, not at every round."""

    with_recall: Fixed
    without_recall: Fixed
    policies: dict[str, Policy]
    """The tools the model may call (`_policies`)."""

    @classmethod
    def of(cls, given: TurnInput, turn: TurnState) -> _L0:
        notices = "".join(f"\n\n{notice}" for notice in given.notices)
        system = ChatMessage(role="system", content=turn.spec.instructions + notices)
        policies = _policies(given, turn)
        return cls(
            Fixed(system, _definitions(given, turn, policies, recall=True)),
            Fixed(system, _definitions(given, turn, policies, recall=False)),
            policies,
        )

    def shown(self, *, recall: bool) -> Fixed:
        return self.with_recall if recall else self.without_recall


def run_turn(given: TurnInput) -> Turn:
    """Continue `given.turn` from its phase: a turn awaiting an answer goes on with the
    answered call, one awaiting children with the next round once they all reported."""
    turn = given.turn
    match turn.phase:
        case AwaitingApproval() as phase if phase.waiting():
            approval = phase.waiting()[0]
            yield AskApproval(approval.request_id, approval.call, approval.asked)
            return turn
        case AwaitingApproval():
            turn, status = yield from _answered(given, turn)
            if status != _GO_ON:
                return turn
        case AwaitingChildren() if turn.pending:
            yield Wait(tuple(child.address for child in turn.pending))
            return turn
        case AwaitingChildren():
            turn = _resume(turn)
        case Running():
            pass
    return (yield from _rounds(given, turn))


def _rounds(given: TurnInput, turn: TurnState) -> Turn:
    view = _View(given.context, shown_history(given.recent))
    l0 = _L0.of(given, turn)
    while True:
        if turn.round >= turn.spec.limits.max_rounds:
            yield Fail(
                f"The turn used all {turn.spec.limits.max_rounds} rounds its spec allows "
                "without reaching a final reply."
            )
            return turn
        turn = msgspec.structs.replace(
            turn, round=turn.round + 1, messages=(*turn.messages, *turn.arrived), arrived=()
        )
        view = msgspec.structs.replace(view, current=view.current.then(turn.messages))
        view = yield from _fold(given, turn, view, l0)
        command = _model_call(given, turn, view, l0)
        reply = yield command
        assert isinstance(reply, ModelReply)
        view = msgspec.structs.replace(
            view, state=observed(view.state, command.prompt_chars, reply)
        )
        turn = _append(turn, reply.message)
        calls = reply.message.tool_calls
        if calls:
            turn, status = yield from _run_calls(given, turn, calls, l0.policies)
            if status != _GO_ON:
                return turn
        arrived = yield Between()
        if isinstance(arrived, Arrived) and (arrived.messages or (arrived.hold and calls)):
            turn = msgspec.structs.replace(turn, arrived=arrived.messages)
            if arrived.hold:  # the round is done: the turn goes on once resumed
                return turn
            continue
        if not calls:
            again = _echoed(turn, reply.message)
            if again is None:
                yield Reply(reply.message.content)
                return turn
            if isinstance(again, str):
                yield Fail(again)
                return turn
            turn = again


_GO_ON, _PAUSED = "go on", "paused"


def _echoed(turn: TurnState, reply: ChatMessage) -> TurnState | str | None:
    """None when `reply` is the answer. When it only repeats a read-back of this turn, the
    turn with it taken out and a nudge put in its place, for one more round (whose model
    may call no tool); a sentence, when the model was nudged already and repeated again."""
    if not repeats(reply.content, read_backs(turn.messages)):
        return None
    if nudged(turn.messages):
        return "The model only repeated what a tool read back, even when asked to answer."
    return msgspec.structs.replace(turn, messages=(*turn.messages[:-1], nudge()))


def _answered(
    given: TurnInput, turn: TurnState
) -> Generator[Command, Result, tuple[TurnState, str]]:
    """Run (or refuse) the call a person answered, then the rest of its round's calls."""
    phase = turn.phase
    assert isinstance(phase, AwaitingApproval)
    approval, call, remaining = phase.approval, phase.approval.call, phase.remaining
    turn = msgspec.structs.replace(turn, phase=Running())
    if approval.page:
        yield Told(call, approval.result, approval.status, shown=True)
        turn = _append(turn, _tool_message(call, approval.result))
    elif call.name == ASK_USER:
        for request in phase.requests():
            content = answer_text(request)
            yield Told(request.call, content)
            turn = _append(turn, _tool_message(request.call, content))
    elif approval.asked is not None or approval.answer:
        key = _idempotency_key(given.address, turn, call)
        asked = approval.asked
        answer = InputAnswer(asked, bool(approval.answer), approval.answers) if asked else None
        turn, status = yield from _called(turn, CallTool(call, key, answer), remaining)
        if status != _GO_ON:
            return turn, status
    else:
        note = f" Their note: {approval.note}" if approval.note else ""
        turn = _append(turn, _tool_message(call, f"A person denied this call.{note}"))
    return (yield from _run_calls(given, turn, remaining, _policies(given, turn)))


def _resume(turn: TurnState) -> TurnState:
    wait_call = _last_call(turn, WAIT)
    note = ChatMessage(
        role="tool",
        name=WAIT,
        tool_call_id=wait_call.id if wait_call else None,
        content="Every helper has replied; their replies are above.",
    )
    return msgspec.structs.replace(turn, phase=Running(), messages=(*turn.messages, note))


def _last_call(turn: TurnState, name: str) -> ToolCall | None:
    for message in reversed(turn.messages):
        for call in message.tool_calls:
            if call.name == name:
                return call
    return None


def _run_calls(
    given: TurnInput, turn: TurnState, calls: tuple[ToolCall, ...], policies: dict[str, Policy]
) -> Generator[Command, Result, tuple[TurnState, str]]:
    """Run a round's calls in order, as `policies` allows them. Stops at a call that needs
    approval (the rest wait in `remaining`), and after the round if the model asked to
    wait for children."""
    wait_asked = False
    for index, call in enumerate(calls):
        policy = policies.get(call.name)
        if policy is None:
            reason = _refusal(call, policies)
            yield Refuse(call, reason)
            turn = _append(turn, _tool_message(call, reason))
        elif policy == "ask" or call.name in _page_names(given, turn):
            return (yield from _awaited(turn, call, calls[index + 1 :], page=policy != "ask"))
        elif call.name == WAIT:
            wait_asked = True
            if not turn.pending:
                turn = _append(turn, _tool_message(call, "There are no helpers to wait for."))
        elif call.name == SPAWN:
            turn = yield from _spawn(given, turn, call, index)
        elif call.name == RECALL:
            result = yield Recall(call, turn.number, turn.messages)
            assert isinstance(result, ToolResult)
            turn = _append(turn, _tool_message(call, result.content))
        else:
            command = CallTool(call, _idempotency_key(given.address, turn, call))
            step = (
                _ask_user(turn, calls, index)
                if call.name == ASK_USER
                else _called(turn, command, calls[index + 1 :])
            )
            turn, status = yield from step
            if status != _GO_ON:
                return turn, status
    if wait_asked and turn.pending:
        yield Wait(tuple(child.address for child in turn.pending))
        return msgspec.structs.replace(turn, phase=AwaitingChildren()), _PAUSED
    return turn, _GO_ON


def _awaited(
    turn: TurnState, call: ToolCall, rest: tuple[ToolCall, ...], *, page: bool
) -> Generator[Command, Result, tuple[TurnState, str]]:
    """Wait for a person's approval of `call` (an `ask` tool), or (`page`) for a page to
    run it; the rest of its round waits behind it."""
    request_id = f"t{turn.number}r{turn.round}-{call.id}"
    yield AskApproval(request_id, call, page=page)
    phase = AwaitingApproval(PendingApproval(request_id, call, page=page), rest)
    return msgspec.structs.replace(turn, phase=phase), _PAUSED


def _called(
    turn: TurnState, command: CallTool, rest: tuple[ToolCall, ...]
) -> Generator[Command, Result, tuple[TurnState, str]]:
    """Make one tool call. A call that asks a person for input parks the turn on it, as an
    approval does (the rest of its round waits in `remaining`)."""
    call = command.call
    result = yield command
    assert isinstance(result, ToolResult)
    if result.asked is None:
        return _append(turn, _tool_message(call, result.content)), _GO_ON
    request_id = f"t{turn.number}r{turn.round}-{call.id}-input{result.asked.leg}"
    yield AskApproval(request_id, call, result.asked)
    pending = PendingApproval(request_id, call, asked=result.asked)
    return msgspec.structs.replace(turn, phase=AwaitingApproval(pending, rest)), _PAUSED


def _ask_user(
    turn: TurnState, calls: tuple[ToolCall, ...], index: int
) -> Generator[Command, Result, tuple[TurnState, str]]:
    """Ask the person the round's `ask_user` calls from `index` on that follow one another,
    all at once, each a request of its own; the rest of the round waits behind them. A
    call whose arguments make no question is refused, and the round goes on."""
    call = calls[index]
    problem = asked_of(call)
    if isinstance(problem, str):
        yield Refuse(call, problem)
        return _append(turn, _tool_message(call, problem)), _GO_ON
    together = asked_together(calls, index)
    pending: list[PendingApproval] = []
    for each, asked in together:
        request_id = f"t{turn.number}r{turn.round}-{each.id}"
        yield AskApproval(request_id, each, asked)
        pending.append(PendingApproval(request_id, each, asked=asked))
    rest = calls[index + len(together) :]
    phase = AwaitingApproval(pending[0], rest, others=tuple(pending[1:]))
    return msgspec.structs.replace(turn, phase=phase), _PAUSED


def _spawn(
    given: TurnInput, turn: TurnState, call: ToolCall, index: int
) -> Generator[Command, Result, TurnState]:
    task = call.arguments.get("task")
    if not isinstance(task, str) or not task.strip():
        problem = "spawn_agent needs a non-empty string `task`."
    elif (found := spawn_problem(turn)) is not None:
        problem = found
    else:
        left = budget_left(turn)
        child = str(child_address(parse_address(given.address), turn.number, turn.round, index))
        wanted = call.arguments.get("tools")
        tools = [str(name) for name in wanted] if isinstance(wanted, list) else None
        share = share_of(left)
        spec = narrowed(turn.spec, tools)
        result = yield Spawn(call, child, task, turn.depth + 1, spec, share)
        assert isinstance(result, Spawned)
        if result.problem:
            return _append(turn, _tool_message(call, result.problem))
        pending = (*turn.pending, PendingChild(child, call.id))
        turn = msgspec.structs.replace(
            turn, pending=pending, spawned=turn.spawned + 1, budget=left - 1 - share
        )
        note = f"Started helper {child}. Its reply will arrive later; call `wait` to pause for it."
        return _append(turn, _tool_message(call, note))
    yield Refuse(call, problem)
    return _append(turn, _tool_message(call, problem))


def page_tools(given: TurnInput, turn: TurnState) -> tuple[ToolDefinition, ...]:
    """The page's tools the model is shown: those the spec grants, unless a tool of the
    deployment or a built-in has the name."""
    taken = (*(tool.name for tool in given.tools), *(t.name for t in BUILTIN_DEFINITIONS))
    return shown_page_tools(turn.spec, turn.page_tools, taken)


def _page_names(given: TurnInput, turn: TurnState) -> frozenset[str]:
    return frozenset(tool.name for tool in page_tools(given, turn))


def _refusal(call: ToolCall, granted: dict[str, Policy]) -> str:
    available = ", ".join(sorted(granted)) or "none"
    return f"There is no tool named {call.name!r} you can call. Tools you can call: {available}."


def _policies(given: TurnInput, turn: TurnState) -> dict[str, Policy]:
    """The tools the model may call (`allow` or `ask`), by name. Denied tools and tools
    the registry does not know are left out: the model is never shown them."""
    known = (tool.name for tool in given.tools)
    shown: dict[str, Policy] = {n: p for n, p in granted(turn.spec, known).items() if p != "deny"}
    if turn.spec.can_spawn:
        shown.update(dict.fromkeys((SPAWN, WAIT), "allow"))
    shown.update(dict.fromkeys(_page_names(given, turn), "allow"))  # the page is the person's
    own = grants(turn.spec)
    if own.get(RECALL) != "deny":
        shown[RECALL] = "allow"
    if own.get(ASK_USER, "deny") != "deny":
        shown[ASK_USER] = "allow"  # asking a person needs no person's approval
    return shown


def _definitions(
    given: TurnInput, turn: TurnState, policies: dict[str, Policy], *, recall: bool
) -> tuple[ToolDefinition, ...]:
    """The tools shown to the model: those `policies` lets it call. `recall` is shown once
    something was folded or cut (before that there is nothing to read back), so plain
    chats stay without tools."""
    tools = [
        tool
        for tool in (*given.tools, *BUILTIN_DEFINITIONS, *page_tools(given, turn))
        if tool.name in policies and (recall or tool.name != RECALL)
    ]
    return tuple(sorted(tools, key=lambda tool: tool.name))


def _layers(turn: TurnState, view: _View, l0: _L0, *, recall: bool) -> Layers:
    return layers_of(
        l0.shown(recall=recall),
        state=view.state,
        recent=view.recent,
        current=view.current,
        turn=turn.number,
        memories=turn.memories,
    )


def _fold(
    given: TurnInput, turn: TurnState, view: _View, l0: _L0
) -> Generator[Command, Result, _View]:
    """Fold the oldest verbatim turns when the prompt would pass the fold threshold: a
    summary step, or the extractive summary when it fails or writes nothing usable."""
    budget, estimate = Budget.of(turn.spec, view.state), Estimate(view.state)
    layers = _layers(turn, view, l0, recall=True)
    plan = plan_fold(layers, budget, estimate)
    if plan is None:
        return view
    label = f"t{turn.number}/fold{view.state.folds + 1}"
    request = summary_request(
        given.address, turn.spec, plan, budget=budget, estimate=estimate, label=label
    )
    answer = yield Summarize(request)
    assert isinstance(answer, Summary)
    limit = summary_chars(budget, estimate)
    text = usable(answer.reply, limit)
    summary = text or extractive(plan.segments, limit)
    state = folded(view.state, plan, summary, budget, estimate)
    after = msgspec.structs.replace(view, state=state, recent=view.recent.after(len(plan.segments)))
    tokens = estimate.tokens(_layers(turn, after, l0, recall=True).chars())
    reason = "" if text else answer.problem or "The summary step wrote nothing usable."
    block = state.blocks[-1]
    model = request.model if text else ""
    yield RecordFold(block, state, plan.tokens_before, tokens, model, reason)
    return after


RECALLS_PER_TURN = 2
"""After this many `recall` calls in a turn it is withheld: still shown (the prompt's
prefix stays the same) but no longer callable, so the model answers. A small model shown
it can call it round after round and never answer."""


def _recalls(turn: TurnState) -> int:
    return sum(1 for m in turn.messages for c in m.tool_calls if c.name == RECALL)


def _withheld(turn: TurnState, shown: set[str], *, cut: bool) -> tuple[str, ...]:
    """The tools shown that this round's model may not call: every one in the round after
    a nudge; `recall` unless it can help (a message was cut, or the user's message points
    back at earlier turns) or once the turn called it `RECALLS_PER_TURN` times. Shown but
    withheld, a tool keeps the prompt's prefix as it was."""
    if turn.messages and turn.messages[-1].name == NUDGE:
        return tuple(sorted(shown))
    if RECALL not in shown:
        return ()
    asked = " ".join(m.content for m in turn.messages if m.role == "user")
    helps = cut or refers_back(asked)
    return () if helps and _recalls(turn) < RECALLS_PER_TURN else (RECALL,)


def _model_call(given: TurnInput, turn: TurnState, view: _View, l0: _L0) -> CallModel:
    budget, estimate = Budget.of(turn.spec, view.state), Estimate(view.state)
    layers = _layers(turn, view, l0, recall=view.state.folds > 0)
    prompt = assemble(layers, budget, estimate)
    if prompt.cut and view.state.folds == 0:
        layers = _layers(turn, view, l0, recall=True)
    shown = {tool.name for tool in layers.tools}
    request = ModelRequest(
        model=turn.spec.model,
        fallback=turn.spec.fallback,
        local_only=turn.spec.local_only,
        messages=prompt.messages,
        tools=layers.tools,
        max_tokens=turn.spec.limits.max_tokens,
        call_key=f"{given.address}/t{turn.number}/r{turn.round}",
        agent=given.address,
        turn=turn.number,
        round=turn.round,
        withheld=_withheld(turn, shown, cut=prompt.cut),
    )
    chars = prompt.chars + len(layers.fixed.tools_text)
    return CallModel(
        request, layers.fingerprint, layers.folds_fingerprint, chars, layers.memory_ids
    )


def _idempotency_key(address: str, turn: TurnState, call: ToolCall) -> str:
    return f"{address}/t{turn.number}/r{turn.round}/{call.id}"


def _tool_message(call: ToolCall, content: str) -> ChatMessage:
    return ChatMessage(role="tool", name=call.name, tool_call_id=call.id, content=content)


def _append(turn: TurnState, message: ChatMessage) -> TurnState:
    return msgspec.structs.replace(turn, messages=(*turn.messages, message))
