"""Retention on a real stack: a finished effect-ledger entry is pruned after
TEASPILL_EFFECT_RETENTION_SECONDS; one whose call never finished is kept."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import pytest

from schemas.effects import Finished
from schemas.harness import ToolResult
from services.contracts import BEGIN_EFFECT, EFFECTS, FINISH_EFFECT, Empty
from services.effects.ledger import ledger_key
from services.ingress import Ingress
from services.lifecycle.restate_admin import RestateAdminApi
from services.stack import Stack
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
            assert ingress.call(BEGIN_EFFECT, Empty(), key).first
        result = ToolResult("c1", "run_command", "ok", "done")
        ingress.call(FINISH_EFFECT, Finished(result), done)
        assert admin.keys_with_prefix(EFFECTS, done) == {done}

        eventually(
            lambda: not admin.keys_with_prefix(EFFECTS, done) or None, 30, "the entry's pruning"
        )

        assert admin.keys_with_prefix(EFFECTS, interrupted) == {interrupted}
        again = ingress.call(BEGIN_EFFECT, Empty(), interrupted)
        assert (again.first, again.finished) == (False, None)
