"""What a round costs Restate: invocations, journal entries and journal bytes, read back
from Restate itself (`sys_invocation`, `sys_journal`) for one turn of teaspill and one
turn of the plain loop.

Each system first runs one turn that is not counted (an agent's first turn may set
things up), then the measured turn. Every invocation Restate made between the two moments
is counted: the agent's wake and whatever it called or sent (the `Model` service, the
`Projector`, ...). They are counted once all of them have finished and, for teaspill,
once the projection holds the turn's events.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from bench import BenchError
from bench.baseline import plain_turn
from bench.projection import wait_projected
from bench.rounds import PROJECTION_TIMEOUT, TENANT, TURN_TIMEOUT, Plan, Target, client, run_turn
from bench.timeline import events_per_turn
from services.stack.journal import Invocation, Journal, RestateAdmin, Tally, tally_by_type

SETTLE_TIMEOUT = 60.0


@dataclass(frozen=True)
class ServiceCost:
    invocations: int
    entries: int
    bytes: int


@dataclass(frozen=True)
class JournalCost:
    """One turn's cost, in total; the `*_per_round` figures divide by its rounds."""

    system: str
    rounds: int
    invocations: int
    entries: int
    bytes: int
    by_service: dict[str, ServiceCost]
    by_type: dict[str, Tally]

    @property
    def invocations_per_round(self) -> float:
        return self.invocations / self.rounds

    @property
    def entries_per_round(self) -> float:
        return self.entries / self.rounds

    @property
    def bytes_per_round(self) -> float:
        return self.bytes / self.rounds


def journal(target: Target, admin_url: str, plan: Plan) -> list[JournalCost]:
    """The cost of one `plan.rounds`-round turn, for teaspill and for the plain loop.

    Every registered service keeps its journals from here on (Restate's default drops a
    finished invocation's journal), so this runs after the timed benchmarks.
    """
    with RestateAdmin(admin_url) as admin:
        admin.retain_journals(admin.services())
        return [_teaspill(target, admin, plan.rounds), _plain(target.url, admin, plan.rounds)]


def _teaspill(target: Target, admin: RestateAdmin, rounds: int) -> JournalCost:
    address = f"{TENANT}.journal"
    with client(target) as ingress:
        run_turn(ingress, address, 1, rounds)
        wait_projected(target.projection, {address: events_per_turn(rounds)}, PROJECTION_TIMEOUT)

        def turn() -> None:
            run_turn(ingress, address, 2, rounds)
            expected = {address: 2 * events_per_turn(rounds)}
            wait_projected(target.projection, expected, PROJECTION_TIMEOUT)

        return cost("teaspill", rounds, *_counted(admin, turn))


def _plain(url: str, admin: RestateAdmin, rounds: int) -> JournalCost:
    with httpx.Client(base_url=url, timeout=TURN_TIMEOUT) as ingress:
        plain_turn(ingress, "journal", 1, rounds)
        invocations, journals = _counted(admin, lambda: plain_turn(ingress, "journal", 2, rounds))
        return cost("plain loop", rounds, invocations, journals)


def _counted(
    admin: RestateAdmin, turn: Callable[[], object]
) -> tuple[list[Invocation], list[Journal]]:
    """Run `turn`; return the invocations Restate made meanwhile, once all have finished,
    with their journals."""
    before = {invocation.id for invocation in admin.invocations()}
    turn()
    made = admin.finished_since(before, SETTLE_TIMEOUT)
    journals = admin.journals([i.id for i in made])
    empty = [i.target_service_name for i, j in zip(made, journals, strict=True) if not j.entries]
    if empty:
        raise BenchError(f"Restate kept no journal for invocations of {sorted(set(empty))}.")
    return made, journals


def cost(
    system: str, rounds: int, invocations: Sequence[Invocation], journals: Sequence[Journal]
) -> JournalCost:
    if not invocations:
        raise BenchError(f"{system}: Restate recorded no invocation for the turn.")
    services: dict[str, ServiceCost] = {}
    for invocation, found in zip(invocations, journals, strict=True):
        name = invocation.target_service_name
        known = services.get(name, ServiceCost(0, 0, 0))
        size = found.size
        services[name] = ServiceCost(
            known.invocations + 1, known.entries + size.entries, known.bytes + size.bytes
        )
    return JournalCost(
        system=system,
        rounds=rounds,
        invocations=len(invocations),
        entries=sum(s.entries for s in services.values()),
        bytes=sum(s.bytes for s in services.values()),
        by_service=dict(sorted(services.items())),
        by_type=tally_by_type(entry for found in journals for entry in found.entries),
    )
