"""The composition harness: runs a spec's `composition` (sequential, parallel, router,
loop, handoff) with the same commands as any harness.

Each stage is a child of the composing agent, spawned with `Spawn(kind=...)` (a one-way
send: it runs the kind's newest published spec) and awaited with `Wait`: the wake ends,
and the turn goes on when the child's report arrives as a wake (`TurnState.reports`).
Nothing waits synchronously, and what to do next is worked out afresh from the turn's
reports at every drive, so a replay (or a drive after a crash) makes the same stages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from dataclasses import dataclass

import msgspec

from schemas.address import child_address, parse_address
from schemas.chat import ToolCall
from schemas.compose import (
    INPUT,
    Composition,
    Handoff,
    Loop,
    Parallel,
    Router,
    Sequential,
)
from schemas.harness import (
    AwaitingChildren,
    CallModel,
    Command,
    Fail,
    HandOff,
    Handover,
    PendingChild,
    Reply,
    Result,
    Running,
    Spawn,
    Spawned,
    TurnState,
    Wait,
)
from schemas.model import ModelReply
from schemas.spec import COMPOSITION_HARNESS
from schemas.wake import ChildReport
from services.harness.children import budget_left, share_of, spawn_problem, token_limit
from services.harness.loop import Turn, TurnInput
from services.harness.picking import PICK_ROUND, chosen, pick_request, rule_pick

STAGE = "stage"
"""The name of a stage's spawning call on the timeline."""
Step = Generator[Command, Result, TurnState]


@dataclass(frozen=True)
class StagePlan:
    """A stage to start: its call id (how its report is found), kind, input and name."""

    id: str
    kind: str
    task: str
    name: str
    round: int
    index: int = 0


def run_composition(given: TurnInput) -> Turn:
    turn = given.turn
    composition = turn.spec.composition
    if isinstance(turn.phase, AwaitingChildren) and turn.pending:
        yield Wait(tuple(child.address for child in turn.pending))
        return turn
    turn = msgspec.structs.replace(turn, phase=Running())
    failed = _failed(turn) if composition else "The composition harness needs a composition."
    if failed is not None or composition is None:
        yield Fail(failed or "")
        return turn
    return (yield from _go_on(given, turn, composition))


def _go_on(given: TurnInput, turn: TurnState, composition: Composition) -> Step:
    match composition:
        case Handoff():
            return (yield from _handoff(given, turn, composition))
        case Router() if not turn.reports:
            return (yield from _route(given, turn, composition))
    next_ = _next(turn, composition)
    if isinstance(next_, str):
        yield Reply(next_)
        return turn
    return (yield from _start(given, turn, next_))


def _input(turn: TurnState) -> str:
    return turn.messages[0].content


def _report(turn: TurnState, id_: str) -> ChildReport | None:
    return next((r for r in turn.reports if r.call_id == id_), None)


def _failed(turn: TurnState) -> str | None:
    """The sentence that ends the composition when one of its stages did not succeed."""
    for report in turn.reports:
        if report.outcome != "succeeded":
            return f"The stage {report.child} ended {report.outcome}: {report.reply}"
    return None


def _next(turn: TurnState, composition: Composition) -> list[StagePlan] | str:  # noqa: PLR0911
    """The stages to start now, or the reply once there are none left."""
    reports, text = turn.reports, _input(turn)
    match composition:
        case Sequential(stages=stages):
            done = len(reports)
            if done == len(stages):
                return reports[-1].reply
            previous = reports[-1].reply if reports else text
            kind = stages[done]
            return [StagePlan(f"s{done}", kind, previous, f"stage {done + 1}: {kind}", done + 1)]
        case Parallel():
            return _parallel(turn, composition)
        case Loop(stage=stage, max_passes=passes, until=until):
            done = len(reports)
            last = reports[-1].reply if reports else None
            if last is not None and ((until and until in last) or done >= passes):
                return last
            return [
                StagePlan(f"p{done}", stage, last or text, f"pass {done + 1}: {stage}", done + 1)
            ]
        case Router():
            return reports[-1].reply
        case Handoff():  # pragma: no cover - handed off before
            return ""


def _parallel(turn: TurnState, parallel: Parallel) -> list[StagePlan] | str:
    """Every branch at once; then the merge, or the joined replies."""
    branches, merge = parallel.branches, parallel.merge
    if not turn.reports:
        text = _input(turn)
        return [
            StagePlan(
                f"b{i}", b.kind, b.input.replace(INPUT, text), f"branch {i + 1}: {b.kind}", 1, i
            )
            for i, b in enumerate(branches)
        ]
    if (merged := _report(turn, "merge")) is not None:
        return merged.reply
    joined = parallel.separator.join(_branch_replies(turn, len(branches)))
    return [StagePlan("merge", merge, joined, f"merge: {merge}", 2)] if merge else joined


def _branch_replies(turn: TurnState, branches: int) -> list[str]:
    """The branches' replies in branch order, whatever order they arrived in."""
    return [report.reply for i in range(branches) if (report := _report(turn, f"b{i}"))]


def _budget_problem(turn: TurnState, wanted: int) -> str | None:
    """Why `wanted` stages more may not start: the turn's bounds, or its token budget (the
    composition counts its stages' tokens as its own)."""
    if (problem := spawn_problem(turn, wanted)) is not None:
        return f"The composition cannot start its next stage: {problem}"
    limit, used = token_limit(turn), _used(turn)
    if limit and used >= limit:
        return (
            f"The composition reached its limit of {limit} model tokens (its stages used "
            f"{used}): its next stage was not started."
        )
    return None


def _used(turn: TurnState) -> int:
    return turn.usage.prompt_tokens + turn.usage.completion_tokens


def _token_share(turn: TurnState, stages: int) -> int | None:
    """Each stage's share of the tokens the composition has left (None: no limit), so
    that its stages together stay within its own limit."""
    limit = token_limit(turn)
    return max((limit - _used(turn)) // stages, 1) if limit else None


def _start(given: TurnInput, turn: TurnState, planned: list[StagePlan]) -> Step:
    """Start every planned stage (all or none: the bounds are checked for all of them
    first), then wait for them."""
    if (problem := _budget_problem(turn, len(planned))) is not None:
        yield Fail(problem)
        return turn
    parent, tokens = parse_address(given.address), _token_share(turn, len(planned))
    for stage in planned:
        child = str(child_address(parent, turn.number, stage.round, stage.index))
        left = budget_left(turn)
        share = share_of(left)
        call = ToolCall(stage.id, STAGE, {"kind": stage.kind})
        spawn = Spawn(
            call, child, stage.task, turn.depth + 1, turn.spec, share, stage.kind, stage.name
        )
        result = yield msgspec.structs.replace(spawn, tokens=tokens)
        assert isinstance(result, Spawned)
        if result.problem:
            yield Fail(f"The composition could not start {stage.name}: {result.problem}")
            return turn
        turn = msgspec.structs.replace(
            turn,
            pending=(*turn.pending, PendingChild(child, stage.id)),
            spawned=turn.spawned + 1,
            budget=left - 1 - share,
        )
    yield Wait(tuple(child.address for child in turn.pending))
    return msgspec.structs.replace(turn, phase=AwaitingChildren())


def _pick(
    given: TurnInput, turn: TurnState, composition: Router | Handoff
) -> Generator[Command, Result, str]:
    """The kind that answers: by rule, or by a model call; a sentence (prefixed `!`) when
    none of the listed kinds is picked."""
    if composition.pick == "rules":
        return rule_pick(composition, _input(turn))
    request = pick_request(given.address, turn, composition, _input(turn))
    reply = yield CallModel(request, prompt_chars=sum(len(m.content) for m in request.messages))
    assert isinstance(reply, ModelReply)
    return chosen(composition, reply.message.content)


def _route(given: TurnInput, turn: TurnState, router: Router) -> Step:
    kind = yield from _pick(given, turn, router)
    if router.pick == "model":
        turn = msgspec.structs.replace(turn, round=PICK_ROUND)
    if kind.startswith("!"):
        yield Fail(kind[1:])
        return turn
    planned = [StagePlan("route", kind, _input(turn), f"route: {kind}", PICK_ROUND)]
    return (yield from _start(given, turn, planned))


def _handoff(given: TurnInput, turn: TurnState, handoff: Handoff) -> Step:
    """Pick the kind, take its spec, and go on as it: the rest of the turn is run by the
    harness that kind names (the driver checks every call against the new spec)."""
    kind = yield from _pick(given, turn, handoff)
    if handoff.pick == "model":
        turn = msgspec.structs.replace(turn, round=PICK_ROUND)
    if kind.startswith("!"):
        yield Fail(kind[1:])
        return turn
    answer = yield HandOff(kind)
    assert isinstance(answer, Handover)
    spec = answer.spec
    if spec is None:
        tenant = parse_address(given.address).tenant
        missing = f"No spec of kind {kind!r} is published for tenant {tenant!r}."
        yield Fail(missing)
        return turn
    if isinstance(spec.composition, Handoff):
        yield Fail(f"The kind {kind!r} hands off again; a turn hands off once.")
        return turn
    turn = msgspec.structs.replace(turn, spec=spec)
    harness = given.harnesses.get(COMPOSITION_HARNESS if spec.composition else spec.harness)
    if harness is None:
        yield Fail(f"This deployment has no harness {spec.harness!r} to run kind {kind!r}.")
        return turn
    return (yield from harness(dataclasses.replace(given, turn=turn)))
