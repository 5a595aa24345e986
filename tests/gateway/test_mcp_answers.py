"""The approvals a turn waits on as the MCP server's input requests, and the client's
responses as the answers it sends: a plain approval is the approve/note form; one whose
call asks for input passes each question on, and its answers go back as `answers`."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from schemas.events import ApprovalRequested
from schemas.questions import Question
from services.gateway import service
from services.gateway.auth import Owned, Principal
from services.gateway.errors import ApiError
from services.gateway.mcp_answers import APPROVAL_SCHEMA, answer_of, input_requests
from services.gateway.mcp_methods import TaskMethods
from services.gateway.mcp_tasks import TaskView
from services.gateway.models import ApprovalIn
from tests.gateway.conftest import T0

pytestmark = pytest.mark.anyio

FORM = {
    "type": "object",
    "properties": {"quantity": {"type": "integer"}},
    "required": ["quantity"],
}
PLAIN = ApprovalRequested("t1r1-call_0", "call_0", "calculator", {"expression": "6*7"})
ASKING = ApprovalRequested(
    "t1r1-call_1-input1",
    "call_1",
    "mcp:shop/order",
    {"item": "tea"},
    questions={
        "quantity": Question("How many tea should be ordered?", FORM),
        "pay": Question("Pay for the order", url="https://shop.example/pay/1"),
    },
)


def test_a_plain_approval_is_the_approve_form_and_a_tools_questions_pass_through() -> None:
    requests = input_requests("acme.a", (PLAIN, ASKING))
    assert requests["t1r1-call_0"]["params"]["requestedSchema"] == APPROVAL_SCHEMA
    assert requests["t1r1-call_1-input1/quantity"] == {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": "How many tea should be ordered?",
            "requestedSchema": FORM,
        },
    }
    page = requests["t1r1-call_1-input1/pay"]["params"]
    assert (page["mode"], page["url"]) == ("url", "https://shop.example/pay/1")
    assert set(requests) == {"t1r1-call_0", "t1r1-call_1-input1/quantity", "t1r1-call_1-input1/pay"}


def test_a_refused_answer_is_asked_again_saying_why() -> None:
    said = "The answer to 'quantity' is missing: it needs 'quantity'."
    requests = input_requests("acme.a", (PLAIN, ASKING), {ASKING.request_id: said})
    message = requests["t1r1-call_1-input1/quantity"]["params"]["message"]
    assert message == f"{said} How many tea should be ordered?"
    assert requests["t1r1-call_0"]["params"]["message"].startswith("Agent acme.a asks")


def test_accepting_every_question_approves_with_the_forms_as_answers() -> None:
    responses = {
        "t1r1-call_1-input1/quantity": {"action": "accept", "content": {"quantity": 3}},
        "t1r1-call_1-input1/pay": {"action": "accept"},
    }
    assert answer_of(ASKING, responses) == ApprovalIn(
        approve=True, answers={"quantity": {"quantity": 3}}
    )
    declined = {**responses, "t1r1-call_1-input1/pay": {"action": "decline"}}
    assert answer_of(ASKING, declined) == ApprovalIn(approve=False)
    assert answer_of(ASKING, {"t1r1-call_1-input1": {"action": "accept"}}) is None
    assert answer_of(
        PLAIN, {"t1r1-call_0": {"action": "accept", "content": {"approve": True}}}
    ) == (ApprovalIn(approve=True))


def _view(*asked: ApprovalRequested) -> TaskView:
    return TaskView("acme.a/m1", "acme.a", "input_required", "", T0, T0, 1, None, None, asked)


async def test_an_answer_the_gateway_refuses_is_not_counted_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[tuple[str, ApprovalIn]] = []

    async def answer(_rt: Any, _agent: Owned, request_id: str, given: ApprovalIn) -> Any:
        sent.append((request_id, given))
        if request_id == ASKING.request_id:
            raise ApiError(422, "The answer to 'quantity' is missing: it needs 'quantity'.")
        return SimpleNamespace(after_seq=7)

    async def applied(*_: Any) -> None:
        """The wait for the agent to apply them (the durable tests' business)."""

    monkeypatch.setattr(service, "answer", answer)
    monkeypatch.setattr(TaskMethods, "applied", applied)
    agent = Owned(Principal("acme", "write", "k1"), "acme.a")
    responses = {
        "t1r1-call_0": {"action": "accept", "content": {"approve": True}},
        "t1r1-call_1-input1/pay": {"action": "accept"},
    }
    answered, problems = await TaskMethods(None).answer(  # type: ignore[arg-type]
        agent, _view(PLAIN, ASKING), responses
    )
    assert answered == {"t1r1-call_0"}
    assert problems == {
        "t1r1-call_1-input1": "The answer to 'quantity' is missing: it needs 'quantity'."
    }
    assert [request for request, _ in sent] == ["t1r1-call_0", "t1r1-call_1-input1"]
