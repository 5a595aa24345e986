"""Retention on a real stack: a finished effect-ledger entry is pruned after
TEASPILL_EFFECT_RETENTION_SECONDS; one whose call never finished is kept. A finished
invocation's journal is kept for TEASPILL_JOURNAL_RETENTION_SECONDS, or not at all."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import httpx
import pytest

from schemas.effects import Begin, Finished
from schemas.harness import ToolResult
from services.contracts import BEGIN_EFFECT, EFFECTS, FINISH_EFFECT
from services.effects.ledger import ledger_key
from services.ingress import Ingress
from services.lifecycle.restate_admin import RestateAdminApi
from services.stack import Stack
from services.stack.journal import RestateAdmin
from tests.durable.conftest import eventually, stack_settings

pytestmark = pytest.mark.durable


def test_a_finished_effect_entry_is_pruned_after_the_retention_and_a_begun_one_kept(
    tmp_path: Path,
) -> None:
    settings = stack_settings(tmp_path / "home").model_copy(
        update={"effect_retention_seconds": 2.0}
    )
    done, interrupted = ledger_key("test.a/t1/r1/c1"), ledger_key("test.a/t1/r1/c2")
    with (
        Stack(settings, gateway=False),
        closing(Ingress(settings.ingress_url)) as ingress,
        closing(RestateAdminApi(settings.admin_url)) as admin,
    ):
        for key in (done, interrupted):
            assert ingress.call(BEGIN_EFFECT, Begin(), key).first
        result = ToolResult("c1", "run_command", "ok", "done")
        ingress.call(FINISH_EFFECT, Finished(result), done)
        assert admin.keys_with_prefix(EFFECTS, done) == {done}

        eventually(
            lambda: not admin.keys_with_prefix(EFFECTS, done) or None, 30, "the entry's pruning"
        )

        assert admin.keys_with_prefix(EFFECTS, interrupted) == {interrupted}
        again = ingress.call(BEGIN_EFFECT, Begin(), interrupted)
        assert (again.first, again.finished) == (False, None)


@pytest.mark.parametrize(("seconds", "shown", "entries"), [(0, None, 0), (3600, "1h", 4)])
def test_a_finished_invocations_journal_is_kept_for_the_journal_retention(
    tmp_path: Path, seconds: int, shown: str | None, entries: int
) -> None:
    settings = stack_settings(tmp_path / "home").model_copy(
        update={"journal_retention_seconds": seconds}
    )
    with (
        Stack(settings, gateway=False),
        closing(Ingress(settings.ingress_url)) as ingress,
        RestateAdmin(settings.admin_url) as admin,
    ):
        assert ingress.call(BEGIN_EFFECT, Begin(), ledger_key("test.a/t1/r1/c1")).first
        services = httpx.get(f"{settings.admin_url}/services").json()["services"]
        # The admin API leaves the field out of a service that keeps no journal by default.
        kept = {service["name"]: service.get("journal_retention") for service in services}
        journal = admin.query(
            "SELECT j.index FROM sys_journal j JOIN sys_invocation i ON j.id = i.id "
            "WHERE i.target_service_name = 'Effects' AND i.status = 'completed'"
        )
    assert len(journal) == entries
    assert kept["Agent"] == kept["Effects"] == kept["Tenant"] == shown
    assert kept["Knowledge"] == kept["Memory"] == kept["Model"] == "0s"
