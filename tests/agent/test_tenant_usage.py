"""The tenant's day of tokens, pure: what a wake is lent and what its settling leaves of
the count, what a wake asks for, and the sentences a turn is refused with before it
starts once a day is used."""

from __future__ import annotations

from schemas.spec import Limits
from schemas.state import Ledger
from schemas.tenant import TokenLease, TokensSettled, TokensToday
from services.agent.funding import agent_refusal, opening_want, tenant_refusal
from services.agent.pipeline import Lease, day_of
from services.tenant.usage import lent, settled

DAY, NEXT = "2026-12-01", "2026-12-02"


def test_a_wake_is_lent_what_is_left_of_the_day_and_settling_leaves_what_it_used() -> None:
    assert lent(None, TokenLease(DAY, 40), 100) == TokensToday(DAY, 40)
    assert lent(TokensToday(DAY, 80), TokenLease(DAY, 40), 100) == TokensToday(DAY, 100)
    assert lent(TokensToday(DAY, 100), TokenLease(DAY, 40), 100) == TokensToday(DAY, 100)
    assert lent(TokensToday(DAY, 100), TokenLease(NEXT, 40), 100) == TokensToday(NEXT, 40)
    assert lent(TokensToday(NEXT, 10), TokenLease(DAY, 40), 100) == TokensToday(NEXT, 50)
    assert lent(TokensToday(DAY, 10**9), TokenLease(DAY, 40), 0) == TokensToday(DAY, 10**9 + 40)
    # lent 40, used 25: 15 go back; lent 40, used 55: the step past the lease counts in full
    assert settled(TokensToday(DAY, 100), TokensSettled(DAY, 40, 25)) == TokensToday(DAY, 85)
    assert settled(TokensToday(DAY, 100), TokensSettled(DAY, 40, 55)) == TokensToday(DAY, 115)
    assert settled(TokensToday(NEXT, 100), TokensSettled(DAY, 40, 25)) is None


def test_a_wake_asks_only_when_it_holds_less_than_the_step_and_never_much_of_the_day() -> None:
    held = Lease(DAY, 1000, 200)
    assert held.wants(DAY, 800, 10_000_000) == 0
    assert held.wants(DAY, 801, 10_000_000) == 4 * 801
    assert held.wants(NEXT, 10, 10_000_000) == 40
    spent = Lease(DAY, 1000, 950)
    assert spent.wants(DAY, 900, 20_000) == 900, "a hundredth of the day, or one step"
    assert spent.wants(DAY, 100, 20_000) == 200


def test_a_turn_whose_wake_holds_none_of_the_day_is_refused_with_the_limit_and_the_reset() -> None:
    assert tenant_refusal("acme", 100, Lease(DAY, 40, 39)) is None
    assert tenant_refusal("acme", 100, Lease(DAY, 40, 40)) == (
        "Tenant acme's agents used the day's 100 model tokens (TEASPILL_TENANT_DAILY_TOKENS) "
        "on 2026-12-01 (UTC): no turn starts until midnight UTC."
    )
    assert opening_want(10_000_000) == 100_000, "a hundredth of the day"
    assert opening_want(50) == 1
    assert day_of(1_796_169_599.0) == "2026-12-01"
    assert day_of(1_796_169_600.0) == "2026-12-02"


def test_an_agent_whose_own_day_is_used_starts_no_turn_that_day() -> None:
    limits = Limits(max_daily_tokens=100)
    assert agent_refusal(limits, Ledger(day=DAY, day_tokens=99), DAY) is None
    assert agent_refusal(limits, Ledger(day=DAY, day_tokens=130), NEXT) is None
    assert agent_refusal(Limits(), Ledger(day=DAY, day_tokens=130), DAY) is None
    assert agent_refusal(limits, Ledger(day=DAY, day_tokens=130), DAY) == (
        "The agent used 130 model tokens on 2026-12-01 (UTC), its limit for a day "
        "(max_daily_tokens = 100): it starts no turn until midnight UTC."
    )
