"""The tenant's day of tokens, pure: what an added step makes of the stored count, and
the sentence a round past the tenant's day ends its turn with."""

from __future__ import annotations

import pytest

from schemas.tenant import TokensToday, TokensUsed
from services.agent.pipeline import BudgetExceededError, check_tenant, day_of
from services.tenant.usage import added


def test_a_step_adds_to_its_day_and_a_new_day_starts_at_what_it_used() -> None:
    assert added(None, TokensUsed("2026-12-01", 5)) == TokensToday("2026-12-01", 5)
    day = TokensToday("2026-12-01", 5)
    assert added(day, TokensUsed("2026-12-01", 7)) == TokensToday("2026-12-01", 12)
    assert added(day, TokensUsed("2026-12-02", 3)) == TokensToday("2026-12-02", 3)
    assert added(day, TokensUsed("2026-11-30", 9)) is None, "a day already over is left"


def test_a_round_past_the_tenants_day_is_refused_with_its_limit_and_when_it_resets() -> None:
    check_tenant("acme", 100, TokensToday("2026-12-01", 99))
    check_tenant("acme", 0, TokensToday("2026-12-01", 10**9))  # 0: no limit
    with pytest.raises(BudgetExceededError) as refused:
        check_tenant("acme", 100, TokensToday("2026-12-01", 100))
    assert str(refused.value) == (
        "Tenant acme's agents used 100 model tokens on 2026-12-01 (UTC), the limit for a day "
        "(TEASPILL_TENANT_DAILY_TOKENS = 100): model calls start again after midnight UTC."
    )
    assert day_of(1_796_169_599.0) == "2026-12-01"
    assert day_of(1_796_169_600.0) == "2026-12-02"
