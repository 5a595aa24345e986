"""Following timelines through the gateway: event-to-follower latency and catch-up speed.

Latency: agents run scripted calculator turns through Restate ingress while SSE followers
read `GET /v1/agents/{address}/events`; an event's latency is from its own `at` (taken by
the agent with `ctx.time()`, the endpoint's wall clock) to the arrival of its frame at a
follower (this process's wall clock: the same machine). A probe polls the projection
every few ms, to split that time at the moment the event became readable there.

Catch-up: one agent's timeline of 10,000 events or more, read from the start by a
follower (`Last-Event-ID: 0`) and, for comparison, as JSON pages of the largest `limit`.

Every follower checks every frame (its id, its type, seq one after the last); what each
follower and each reader received must equal the agent's timeline read back from Restate.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import statistics
import time
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import msgspec

from bench import BenchError
from bench.cpu import CpuTimes, cpu_times
from bench.follow import Arrival, Follower, ProjectionProbe, wall_clock
from bench.projection import wait_projected
from bench.report import table
from bench.rounds import PROJECTION_TIMEOUT, TENANT, Plan, Target, bench_spec, client, run_turn
from bench.rounds import reply_text as turn_reply
from bench.stats import Spread, spread
from bench.timeline import check_timeline, events_per_turn, read_timeline
from schemas.events import Event, TimelinePage, ToolFinished, TurnEnded
from schemas.spec import AgentSpec
from services.contracts import ADD_KEY
from services.executor.scripted import script
from services.harness.context import MAX_SHOWN
from services.keys import new_key

FOLLOW_TIMEOUT = 120.0
"""Seconds a follower may wait for its next frame, and the drive for its next turn."""
CATCH_UP_TIMEOUT = 600.0
PAGE_LIMIT = 500
"""The gateway's largest `limit` for a timeline page."""
KEY_TIMEOUT = 60.0
WIDE_ROUNDS = 11
"""Rounds per turn of the catch-up timeline: ten of many calls each, then the reply."""
WIDE_WINDOW = 1_048_576
"""Tokens the catch-up turns declare (the most a spec may): the `script` model reads
every line of its script."""


@dataclass(frozen=True)
class SsePlan:
    turns: int
    """Measured turns per agent in the latency runs (after one turn that is not measured)."""
    rounds: int
    followers: int
    """Followers of the one agent in the many-followers run."""
    agents: int
    """Agents in the many-agents run, each with one follower."""
    timeline: int
    """Events (at least) in the catch-up timeline."""
    calls: int
    """Calculator calls per round when building it: each adds two events."""
    repeats: int
    """Reads of the whole catch-up timeline, each way: a read takes well under a second,
    and on a shared machine single reads vary by half."""


def sse_plan(plan: Plan, quick: bool) -> SsePlan:
    if quick:
        return SsePlan(plan.turns, plan.rounds, 3, 2, timeline=300, calls=10, repeats=1)
    return SsePlan(plan.turns, plan.rounds, 10, 10, timeline=10_000, calls=20, repeats=9)


@dataclass(frozen=True)
class Latency:
    scenario: str
    agents: int
    followers: int
    """Per agent."""
    events: int
    """Events appended while followed, over all agents."""
    to_follower: Spread
    """From the event's `at` to its frame at a follower: one sample per follower."""
    to_projection: Spread
    """From the event's `at` until the probe saw it in the projection."""
    projection_to_follower: Spread


@dataclass(frozen=True)
class Built:
    events: int
    turns: int
    rounds: int
    calls: int
    seconds: float
    """From the first turn's start until the projection held every event."""


@dataclass(frozen=True)
class CatchUp:
    how: str
    events: int
    events_per_s: float
    """Median over the repeats: events / (last event's arrival - the request's start)."""
    first_ms: float
    """Median: from the request's start to the first event."""
    gateway_cpu: float
    """Median CPU of the hypercorn processes / wall time (the endpoint is idle meanwhile)."""
    client_cpu: float
    runs: list[float]
    """Events per second of each repeat."""


@dataclass(frozen=True)
class SseResult:
    latency: list[Latency]
    built: Built | None
    catch_up: list[CatchUp]


@dataclass(frozen=True)
class Api:
    url: str
    key: str

    def client(self) -> httpx.AsyncClient:
        auth = {"Authorization": f"Bearer {self.key}"}
        return httpx.AsyncClient(base_url=self.url, headers=auth, timeout=FOLLOW_TIMEOUT)


@dataclass(frozen=True)
class Scenario:
    name: str
    agents: int
    followers: int
    """Per agent."""
    prefix: str
    """Of the agents' addresses."""


def sse(target: Target, gateway_url: str, plan: SsePlan, load: bool = False) -> SseResult:
    """Latency with one agent (one follower, then many) and catch-up; with `load`, the
    many-agents latency run alone."""
    api = Api(gateway_url, read_key(target, gateway_url))
    if load:
        many = Scenario(f"{plan.agents} agents, 1 follower each", plan.agents, 1, "sse-load")
        return SseResult([_latency(api, target, plan, many)], None, [])
    latency = [_latency(api, target, plan, scenario) for scenario in scenarios(plan)]
    built, reference = _build(target, plan, f"{TENANT}.sse-catch-up")
    return SseResult(latency, built, _catch_ups(api, reference, plan.repeats))


def scenarios(plan: SsePlan) -> list[Scenario]:
    return [
        Scenario("1 agent, 1 follower", 1, 1, "sse-one"),
        Scenario(f"1 agent, {plan.followers} followers", 1, plan.followers, "sse-many"),
    ]


def read_key(target: Target, gateway_url: str) -> str:
    """A read key for the bench tenant, added as `teaspill keys create` would; returns once
    the gateway accepts it (the projector has written it)."""
    plaintext, key = new_key(TENANT, "read", datetime.fromtimestamp(wall_clock(), UTC))
    with client(target) as ingress:
        ingress.call(ADD_KEY, key, TENANT)
    auth = {"Authorization": f"Bearer {plaintext}"}
    deadline = time.perf_counter() + KEY_TIMEOUT
    with httpx.Client(base_url=gateway_url, headers=auth, timeout=10.0) as http:
        while http.get("/v1/agents").status_code != httpx.codes.OK:
            if time.perf_counter() > deadline:
                raise BenchError(f"the gateway did not accept a new key within {KEY_TIMEOUT:g} s.")
            time.sleep(0.05)
    return plaintext


def _latency(api: Api, target: Target, plan: SsePlan, scenario: Scenario) -> Latency:
    """One turn per agent first (so the gateway knows the agent, and every follower is
    live before anything is measured), then `plan.turns` turns while followed."""
    addresses = [f"{TENANT}.{scenario.prefix}-{index}" for index in range(scenario.agents)]
    first = events_per_turn(plan.rounds)
    _drive(target, addresses, 1, 1, plan.rounds)
    wait_projected(target.projection, dict.fromkeys(addresses, first), PROJECTION_TIMEOUT)
    last = (plan.turns + 1) * first
    readers = [
        Follower(a, last, live_after=first) for a in addresses for _ in range(scenario.followers)
    ]
    probe = ProjectionProbe(target.projection, addresses, first)

    async def turns() -> None:
        await asyncio.to_thread(_drive, target, addresses, 2, plan.turns + 1, plan.rounds)

    with probe.running():
        asyncio.run(_follow_while(api, readers, turns))
    timelines = {a: _checked(target, a, plan.turns + 1, plan.rounds) for a in addresses}
    for reader in readers:
        _same(f"follower of {reader.address}", reader.arrivals, timelines[reader.address])
    live = [a for reader in readers for a in reader.arrivals if a.event.seq > first]
    appended = [e for events in timelines.values() for e in events if e.seq > first]
    return Latency(
        scenario.name,
        scenario.agents,
        scenario.followers,
        len(appended),
        spread([_ms(a.event.at.timestamp(), a.at) for a in live]),
        spread([_ms(e.at.timestamp(), probe.at(e)) for e in appended]),
        spread([_ms(probe.at(a.event), a.at) for a in live]),
    )


def _drive(target: Target, addresses: list[str], first: int, last: int, rounds: int) -> None:
    """Turns `first`..`last` on each agent, one after another; the agents side by side."""

    def agent(address: str) -> None:
        with client(target) as ingress:
            for turn in range(first, last + 1):
                run_turn(ingress, address, turn, rounds)

    with ThreadPoolExecutor(len(addresses)) as pool:
        for done in [pool.submit(agent, address) for address in addresses]:
            done.result()


async def _follow_while(
    api: Api, readers: list[Follower], drive: Callable[[], Awaitable[None]]
) -> None:
    """Connect every follower, wait until all are live, drive, wait until all saw the end.

    A follower's failure (a bad frame, a closed stream) ends the run at once."""
    async with api.client() as http:
        tasks = [asyncio.create_task(reader.run(http)) for reader in readers]
        try:
            await _watching(tasks, asyncio.gather(*(r.live.wait() for r in readers)))
            await _watching(tasks, drive())
            await _watching(tasks, asyncio.gather(*tasks))
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def _watching(tasks: list[asyncio.Task[None]], step: Awaitable[Any]) -> None:
    waiter = asyncio.ensure_future(step)
    pending: set[asyncio.Future[Any]] = {waiter, *tasks}
    try:
        while not waiter.done():
            done, pending = await asyncio.wait(
                pending, timeout=FOLLOW_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                raise BenchError(f"the followers saw nothing new for {FOLLOW_TIMEOUT:g} s.")
            for finished in done:
                finished.result()
    finally:
        waiter.cancel()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await waiter  # its error, if any, was raised above or is moot now


def _checked(target: Target, address: str, turns: int, rounds: int) -> list[Event]:
    with client(target) as ingress:
        events = read_timeline(ingress, address)
    check_timeline(address, events, turns, rounds)
    return events


def _same(who: str, arrivals: list[Arrival], events: list[Event]) -> None:
    if [a.event for a in arrivals] != events:
        raise BenchError(f"the {who} received {len(arrivals)} events unlike the timeline's.")


def _ms(earlier: float, later: float) -> float:
    return (later - earlier) * 1000.0


def wide_script(turn: int, rounds: int, calls: int) -> str:
    """R-1 rounds of `calls` calculator calls each, then the reply. The script must be
    shown whole (the context engine cuts any message past `MAX_SHOWN` characters)."""
    line = {
        "calls": [
            {"name": "calculator", "arguments": {"expression": f"{turn}+{call}"}}
            for call in range(calls)
        ]
    }
    text = script(*[line] * (rounds - 1), {"reply": turn_reply(turn)})
    if len(text) > MAX_SHOWN:
        raise BenchError(f"a script of {calls} calls a round is too long to be shown whole.")
    return text


def wide_spec(rounds: int) -> AgentSpec:
    """The bench spec with a window that shows a wide script whole: the context engine
    cuts a message past a quarter of the prompt, and a cut script is no script."""
    spec = bench_spec(rounds)
    return msgspec.structs.replace(
        spec, limits=msgspec.structs.replace(spec.limits, context_window=WIDE_WINDOW)
    )


def _build(target: Target, plan: SsePlan, address: str) -> tuple[Built, list[Event]]:
    """One agent's timeline of at least `plan.timeline` events, projected and checked.

    Many calls a round make events faster than many rounds (two appends per call against
    a model call per round), and keep the history each model call carries shorter."""
    rounds = WIDE_ROUNDS
    per_turn = 1 + (rounds - 1) * (1 + 2 * plan.calls) + 2  # TurnStarted ... TurnEnded
    turns = math.ceil(plan.timeline / per_turn)
    started = time.perf_counter()
    with client(target) as ingress:
        for turn in range(1, turns + 1):
            text = wide_script(turn, rounds, plan.calls)
            if ingress.message(address, text, wide_spec(rounds)).reply != turn_reply(turn):
                raise BenchError(f"{address} turn {turn} did not reply as its script says.")
    wait_projected(target.projection, {address: turns * per_turn}, PROJECTION_TIMEOUT)
    seconds = time.perf_counter() - started
    with client(target) as ingress:
        events = read_timeline(ingress, address)
    _check_built(address, events, turns, turns * per_turn)
    return Built(len(events), turns, rounds, plan.calls, seconds), events


def _check_built(address: str, events: list[Event], turns: int, expected: int) -> None:
    if [e.seq for e in events] != list(range(1, expected + 1)):
        raise BenchError(f"{address}: {len(events)} events, not seq 1..{expected}.")
    ends = [e.body for e in events if isinstance(e.body, TurnEnded)]
    if [end.outcome for end in ends] != ["succeeded"] * turns:
        raise BenchError(f"{address}: not every one of its {turns} turns succeeded.")
    if any(isinstance(e.body, ToolFinished) and e.body.status != "ok" for e in events):
        raise BenchError(f"{address}: a calculator call failed.")


@dataclass(frozen=True)
class Reading:
    """One read of the whole timeline; times are wall-clock seconds."""

    events: list[Event]
    started: float
    """When the request was sent (the client was made before)."""
    first: float
    last: float
    """When the last event arrived."""
    cpu: CpuTimes
    """From just before the request until the read was done."""

    @property
    def per_second(self) -> float:
        return len(self.events) / (self.last - self.started)


def _catch_ups(api: Api, reference: list[Event], repeats: int) -> list[CatchUp]:
    address, last = reference[0].agent, len(reference)
    ways: list[tuple[str, Callable[[], Coroutine[Any, Any, Reading]]]] = [
        ("SSE, Last-Event-ID: 0", lambda: _stream_all(api, address, last)),
        (f"JSON pages, limit={PAGE_LIMIT}", lambda: _page_all(api, address, last)),
    ]
    readings: dict[str, list[Reading]] = {how: [] for how, _ in ways}
    for _ in range(repeats):  # alternated, so both see the same machine
        for how, read in ways:
            reading = asyncio.run(read())
            if reading.events != reference:
                raise BenchError(f"{how}: the events read differ from the timeline's.")
            readings[how].append(reading)
    return [_catch_up(how, runs) for how, runs in readings.items()]


def _catch_up(how: str, runs: list[Reading]) -> CatchUp:
    def median(of: Callable[[Reading], float]) -> float:
        return statistics.median(of(run) for run in runs)

    return CatchUp(
        how,
        len(runs[0].events),
        median(lambda r: r.per_second),
        median(lambda r: _ms(r.started, r.first)),
        median(lambda r: r.cpu.endpoint / (r.last - r.started)),
        median(lambda r: r.cpu.client / (r.last - r.started)),
        [round(r.per_second, 1) for r in runs],
    )


async def _stream_all(api: Api, address: str, last: int) -> Reading:
    reader = Follower(address, last)
    async with api.client() as http:
        before, started = cpu_times(), wall_clock()
        await asyncio.wait_for(reader.run(http), CATCH_UP_TIMEOUT)
        cpu = cpu_times() - before
    arrivals = reader.arrivals
    return Reading([a.event for a in arrivals], started, arrivals[0].at, arrivals[-1].at, cpu)


async def _page_all(api: Api, address: str, last: int) -> Reading:
    events: list[Event] = []
    async with api.client() as http:
        before, started, first = cpu_times(), wall_clock(), 0.0
        while len(events) < last:
            after = events[-1].seq if events else 0
            params = {"after": after, "limit": PAGE_LIMIT}
            response = await http.get(f"/v1/agents/{address}/timeline", params=params)
            if response.status_code != httpx.codes.OK:
                raise BenchError(f"{address}: a timeline page answered {response.status_code}.")
            page = msgspec.json.decode(response.content, type=TimelinePage)
            if not page.events:
                raise BenchError(f"{address}: an empty page after seq {after} of {last}.")
            events.extend(page.events)
            first = first or wall_clock()
        ended = wall_clock()
        return Reading(events, started, first, ended, cpu_times() - before)


def render(result: SseResult, about: dict[str, Any]) -> str:
    header = (
        f"Following timelines through the gateway (SSE) on {about['cores']} cores,"
        f" restate-server {about['restate_server']}, commit {about['commit']}"
    )
    parts = [header, _latency_table(result.latency)]
    if result.built is not None:
        parts += [_built_note(result.built), _catch_table(result)]
    return "\n\n".join(parts)


def _built_note(built: Built) -> str:
    return (
        f"Catch-up timeline: {built.events} events ({built.turns} turns of {built.rounds}"
        f" rounds, {built.calls} calculator calls a round), built and projected in"
        f" {built.seconds:.1f} s ({built.events / built.seconds:.0f} events/s)."
    )


def _latency_table(rows: list[Latency]) -> str:
    head = ["event to follower, ms", "events", "samples", "p50", "p95"]
    head += ["projected p50", "p95", "then follower p50", "p95"]
    return table(
        head,
        [
            [r.scenario, str(r.events), str(r.to_follower.samples)]
            + [
                f"{value:.1f}"
                for s in (r.to_follower, r.to_projection, r.projection_to_follower)
                for value in (s.median_ms, s.p95_ms)
            ]
            for r in rows
        ],
    )


def _catch_table(result: SseResult) -> str:
    head = ["catch-up from seq 0", "events/s", "range", "first event ms"]
    head += ["gateway CPU", "client CPU"]
    rows = [_catch_row(c) for c in result.catch_up]
    return table(head, rows)


def _catch_row(c: CatchUp) -> list[str]:
    rate = [f"{c.events_per_s:,.0f}", f"{min(c.runs):,.0f}-{max(c.runs):,.0f}"]
    cpu = [f"{c.gateway_cpu:.0%}", f"{c.client_cpu:.0%}"]
    return [c.how, *rate, f"{c.first_ms:.1f}", *cpu]
