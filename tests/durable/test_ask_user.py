"""`ask_user` on a real stack (restate-server, the endpoint, the gateway): the question is
asked on the timeline, an answer that does not fit its choices is refused with the
gateway's sentence and the question still waits, the fitting answer is the call's result;
questions asked at once are answered one at a time; a question unanswered past the spec's
approval timeout parks the turn, and a later answer resumes it; a new message supersedes
them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from schemas.events import ApprovalAbandoned, ApprovalRequested, ToolFinished, TurnEnded
from services.executor.scripted import script
from tests.durable.conftest import eventually
from tests.gateway.test_stack import GatewayStack, gateway_stack

pytestmark = pytest.mark.durable

COLOUR = {"question": "Which colour?", "choices": ["red", "blue"]}
NAME = {
    "question": "Your name?",
    "form": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with gateway_stack(tmp_path_factory.mktemp("ask-home")) as stack:
        spec = {
            "kind": "asker",
            "instructions": "Follow the script.",
            "model": "script",
            "tools": {"ask_user": "allow"},
        }
        quick = {**spec, "kind": "quick", "limits": {"approval_timeout": 1}}
        for each in (spec, quick):
            published = stack.http.post("/v1/specs", json=each, headers=stack.auth)
            assert published.status_code == 201, published.text
        yield stack


def ask(
    gw: GatewayStack, address: str, *calls: dict[str, Any], kind: str = "asker"
) -> list[ApprovalRequested]:
    """Send a script whose first round asks `calls`; the requests once all are recorded."""
    lines = [{"name": "ask_user", "arguments": c} for c in calls]
    text = script({"calls": lines}, {"reply": "{results}"})
    sent = gw.http.post(
        f"/v1/agents/{address}/messages",
        json={"text": text, "kind": kind},
        headers=gw.auth,
    )
    assert sent.status_code == 202, sent.text

    def asked() -> list[ApprovalRequested] | None:
        found = [e.body for e in gw.timeline(address) if isinstance(e.body, ApprovalRequested)]
        return found if len(found) == len(calls) else None

    return eventually(asked, 60, "the questions")


def answer(gw: GatewayStack, address: str, request: str, **values: Any) -> httpx.Response:
    body = {"approve": True, "answers": {"question": values}}
    return gw.http.post(f"/v1/agents/{address}/approvals/{request}", json=body, headers=gw.auth)


def ended(gw: GatewayStack, address: str) -> TurnEnded:
    (event,) = gw.wait_for(address, "turn_ended")[-1:]
    assert isinstance(event.body, TurnEnded)
    return event.body


def test_a_question_with_choices_takes_only_one_of_them_and_its_answer_is_the_result(
    gw: GatewayStack,
) -> None:
    address = "acme.ask-colour"
    (asked,) = ask(gw, address, COLOUR)
    assert asked.name == "ask_user"
    assert asked.questions["question"].message == "Which colour?"
    wrong = answer(gw, address, asked.request_id, answer="green")
    assert wrong.status_code == 422, wrong.text
    assert "one of 'red', 'blue'" in wrong.json()["error"]["message"]
    right = answer(gw, address, asked.request_id, answer="blue")
    assert right.status_code == 202, right.text
    assert (ended(gw, address).outcome, ended(gw, address).reply) == ("succeeded", "blue")
    results = [e.body for e in gw.timeline(address) if isinstance(e.body, ToolFinished)]
    assert [(r.name, r.content) for r in results] == [("ask_user", "blue")]


def test_questions_asked_at_once_are_answered_one_at_a_time(gw: GatewayStack) -> None:
    address = "acme.ask-two"
    first, second = ask(gw, address, COLOUR, NAME)
    assert answer(gw, address, second.request_id, name="Ada").status_code == 202
    gw.wait_for(address, "approval_answered")
    row = gw.http.get(f"/v1/agents/{address}", headers=gw.auth).json()
    assert row["status"] in ("waiting", "parked"), row
    assert answer(gw, address, first.request_id, answer="red").status_code == 202
    done = ended(gw, address)
    assert (done.outcome, done.reply.splitlines()) == ("succeeded", ["red", '{"name":"Ada"}'])


def test_a_new_message_supersedes_a_question(gw: GatewayStack) -> None:
    address = "acme.ask-superseded"
    (asked,) = ask(gw, address, COLOUR)
    gw.send(address, "never mind")
    abandoned = gw.wait_for(address, "approval_abandoned")
    assert [e.body for e in abandoned if isinstance(e.body, ApprovalAbandoned)] == [
        ApprovalAbandoned(asked.request_id)
    ]
    ends = [e.body for e in gw.wait_for(address, "turn_ended") if isinstance(e.body, TurnEnded)]
    assert ends[0].outcome == "superseded"
    late = answer(gw, address, asked.request_id, answer="red")
    assert late.status_code == 409, late.text


def test_a_question_unanswered_past_the_timeout_parks_and_a_later_answer_resumes_it(
    gw: GatewayStack,
) -> None:
    address = "acme.ask-parked"
    (asked,) = ask(gw, address, NAME, kind="quick")
    gw.wait_for(address, "turn_parked")
    row = gw.http.get(f"/v1/agents/{address}", headers=gw.auth).json()
    assert row["status"] == "parked", row
    assert answer(gw, address, asked.request_id, name="Bo").status_code == 202
    done = ended(gw, address)
    assert (done.outcome, done.reply) == ("succeeded", '{"name":"Bo"}')
