"""How a turn's end is a task's (pure, from the timeline): a reply is `completed` with its
result; a turn that failed within its own limits is `completed` with a tool error; one
that failed because a step could not run is `failed` with a JSON-RPC error carrying the
turn's sentence, and no result; an ending recorded before the cause was kept stays a tool
error."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.events import Event, FailedBy, TurnEnded, TurnStarted
from services.gateway.mcp_tasks import INTERNAL_ERROR, modern_task, task_view
from tests.gateway.conftest import T0

STARTED = Event("acme.a", 1, 1, 0, T0, TurnStarted("go", "job", 1, None, "m1"))


def task(ended: TurnEnded) -> dict[str, Any]:
    view = task_view("acme.a", "m1", [STARTED, Event("acme.a", 2, 1, 1, T0, ended)])
    return modern_task(view, detailed=True)


def test_a_reply_is_a_completed_task_with_its_result() -> None:
    done = task(TurnEnded("succeeded", reply="42"))
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "42"}]
    assert "error" not in done


@pytest.mark.parametrize("failed_by", ["turn", ""])
def test_a_turn_that_failed_within_its_limits_is_a_completed_tool_error(
    failed_by: FailedBy,
) -> None:
    done = task(TurnEnded("failed", reason="The turn used all 1 rounds.", failed_by=failed_by))
    assert done["status"] == "completed"
    assert done["result"]["isError"] is True
    assert done["result"]["content"][0]["text"] == "The turn used all 1 rounds."
    assert "error" not in done


def test_a_turn_whose_step_broke_is_a_failed_task_with_the_sentence() -> None:
    sentence = "The model step failed: the model could not be reached."
    done = task(TurnEnded("failed", reason=sentence, failed_by="step"))
    assert done["status"] == "failed"
    assert done["statusMessage"] == sentence
    assert done["error"] == {
        "code": INTERNAL_ERROR,
        "message": sentence,
        "data": {"agent": "acme.a"},
    }
    assert "result" not in done
