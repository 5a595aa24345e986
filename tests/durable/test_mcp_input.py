"""An MCP tool that needs a person's input, on a real stack: the test's own server
(`tests.fixtures.mcp_input`) answers the stateless revision's "input required"; the turn
parks on it as on an approval, the person answers through the gateway's approvals route,
and the call is sent again with the answer and the server's request state. A SIGKILL of
the endpoint while the turn is parked loses nothing and runs nothing twice."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from schemas.events import (
    ApprovalAnswered,
    ApprovalRequested,
    Event,
    ToolCalled,
    ToolFinished,
    TurnEnded,
)
from services.executor.scripted import script
from services.ingress import Ingress
from services.stack import Stack, free_port, isolated_settings
from tests.durable.conftest import LiveStack, eventually
from tests.fixtures.serving import start
from tests.gateway.test_stack import admin_key

pytestmark = pytest.mark.durable


def _order(item: str) -> str:
    return script(
        {"calls": [{"name": "mcp:shop/order", "arguments": {"item": item}}]},
        {"reply": "{results}"},
    )


@dataclass
class Shop:
    folder: Path
    live: LiveStack
    http: httpx.Client
    key: str

    def send(self, address: str, item: str = "tea") -> None:
        body = {"text": _order(item), "kind": "shop"}
        sent = self.post(f"/v1/agents/{address}/messages", body)
        assert sent.status_code == 202, sent.text

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return self.http.post(path, json=body, headers={"Authorization": f"Bearer {self.key}"})

    def answer(self, address: str, request: str, body: dict[str, Any]) -> httpx.Response:
        return self.post(f"/v1/agents/{address}/approvals/{request}", body)

    def asked(self, address: str, leg: int = 1) -> ApprovalRequested:
        def seen() -> ApprovalRequested | None:
            found = [
                b for b in _bodies(self.live.shown(address)) if isinstance(b, ApprovalRequested)
            ]
            return found[leg - 1] if len(found) >= leg else None

        return eventually(seen, 60, "the call to ask for input")

    def calls(self, what: str) -> list[str]:
        path = self.folder / "calls"
        lines = path.read_text().splitlines() if path.exists() else []
        return [line for line in lines if line.startswith(what)]


def _bodies(events: list[Event]) -> list[Any]:
    return [event.body for event in events]


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    folder = tmp_path_factory.mktemp("shop")
    port = free_port()
    servers = folder / "mcp.toml"
    servers.write_text(f'[servers.shop]\nurl = "http://127.0.0.1:{port}/mcp"\n')
    server = start("tests.fixtures.mcp_input", port, str(folder))
    settings = isolated_settings(tmp_path_factory.mktemp("home"), mcp_servers_file=servers)
    try:
        with (
            Stack(settings, endpoint_env={"TEASPILL_LIVE_TOKEN": ""}) as stack,
            httpx.Client(base_url=stack.gateway.url, timeout=30) as http,
            contextlib.closing(Ingress(settings.ingress_url)) as ingress,
        ):
            key = admin_key(settings, http)
            spec = {
                "kind": "shop",
                "instructions": "Follow the script.",
                "model": "script",
                "tools": {"mcp:shop/order": "allow"},
            }
            published = http.post(
                "/v1/specs", json=spec, headers={"Authorization": f"Bearer {key}"}
            )
            assert published.status_code == 201, published.text
            live = LiveStack(settings, stack.restate, stack.endpoint, ingress)
            yield Shop(folder, live, http, key)
    finally:
        server.kill()
        server.wait()


def _address(name: str) -> str:
    return f"acme.{name}"


def test_the_question_parks_the_turn_and_the_answer_resumes_the_call(shop: Shop) -> None:
    address = _address("input-answered")
    shop.send(address)
    asked = shop.asked(address)
    (question,) = asked.questions.values()
    assert asked.name == "mcp:shop/order"
    assert question.message == "How many tea should be ordered?"
    assert question.schema["required"] == ["quantity"]
    status = shop.http.get(f"/v1/agents/{address}", headers={"Authorization": f"Bearer {shop.key}"})
    assert status.json()["status"] == "waiting", status.text

    answered = shop.answer(
        address, asked.request_id, {"approve": True, "answers": {"quantity": {"quantity": 3}}}
    )
    assert answered.status_code == 202, answered.text
    ended = shop.live.wait_for_turn_end(address, 1)
    assert (ended.outcome, ended.reply) == ("succeeded", "Ordered 3 tea."), ended
    bodies = _bodies(shop.live.events(address))
    assert [type(b).__name__ for b in bodies if isinstance(b, ToolCalled | ToolFinished)] == [
        "ToolCalled",
        "ToolFinished",
    ], "one call on the timeline, however many legs it took"
    (finished,) = [b for b in bodies if isinstance(b, ToolFinished)]
    assert (finished.status, finished.content) == ("ok", "Ordered 3 tea.")
    (applied,) = [b for b in bodies if isinstance(b, ApprovalAnswered)]
    assert applied.answers == {"quantity": {"quantity": 3}}
    key = f"{address}/t1/r1/"
    (first,) = shop.calls("asked tea " + key)
    (second,) = shop.calls("ordered tea 3 " + key)
    assert second.split()[-1] == first.split()[-1] + "/input1", "the same key, one leg further"


def test_a_wrong_or_missing_answer_gets_a_sentence_and_the_question_still_waits(
    shop: Shop,
) -> None:
    address = _address("input-wrong")
    shop.send(address)
    request = shop.asked(address).request_id
    missing = shop.answer(address, request, {"approve": True})
    assert missing.status_code == 422, missing.text
    assert (
        missing.json()["error"]["message"]
        == "The answer to 'quantity' is missing: it needs 'quantity'."
    )
    wrong = shop.answer(
        address, request, {"approve": True, "answers": {"quantity": {"quantity": "three"}}}
    )
    assert wrong.status_code == 422, wrong.text
    assert wrong.json()["error"]["message"] == (
        "The answer to 'quantity' gives 'quantity' \"three\", which is not an integer."
    )
    stray = shop.answer(address, request, {"approve": True, "answers": {"size": {"cm": 3}}})
    assert stray.status_code == 422, stray.text
    assert "There is no question 'size' to answer" in stray.json()["error"]["message"]
    declined = shop.answer(address, request, {"approve": False, "note": "not now"})
    assert declined.status_code == 202, declined.text
    ended = shop.live.wait_for_turn_end(address, 1)
    assert ended.reply == "Nothing was ordered (decline).", ended
    assert len(shop.calls(f"declined tea {address}/")) == 1


def test_a_sigkill_while_parked_loses_nothing_and_runs_nothing_twice(shop: Shop) -> None:
    address = _address("input-killed")
    shop.send(address)
    request = shop.asked(address).request_id
    shop.live.endpoint.kill()
    answered = shop.answer(
        address, request, {"approve": True, "answers": {"quantity": {"quantity": 2, "gift": True}}}
    )
    assert answered.status_code == 202, "Restate holds the answer while the endpoint is down"
    shop.live.endpoint.start()
    ended = shop.live.wait_for_turn_end(address, 1)
    assert (ended.outcome, ended.reply) == ("succeeded", "Ordered 2 tea as a gift."), ended
    assert len(shop.calls(f"asked tea {address}/")) == 1
    assert len(shop.calls(f"ordered tea 2 {address}/")) == 1
    shop.live.restart_endpoint(kill=True)
    again = shop.answer(
        address, request, {"approve": True, "answers": {"quantity": {"quantity": 2}}}
    )
    assert again.status_code == 409, again.text
    assert len(shop.calls(f"ordered tea 2 {address}/")) == 1
    ends = [b for b in _bodies(shop.live.events(address)) if isinstance(b, TurnEnded)]
    assert len(ends) == 1


def test_an_answered_call_cut_by_a_sigkill_ran_once_and_says_unknown(shop: Shop) -> None:
    address = _address("input-cut")
    shop.send(address, "slow-tea")
    request = shop.asked(address).request_id
    answer = {"approve": True, "answers": {"quantity": {"quantity": 5}}}
    assert shop.answer(address, request, answer).status_code == 202
    eventually(lambda: shop.calls("ordering slow-tea") or None, 60, "the answered call")
    shop.live.restart_endpoint(kill=True)
    (shop.folder / "release-slow-tea").touch()
    ended = shop.live.wait_for_turn_end(address, 1)
    assert ended.outcome == "succeeded", ended
    (finished,) = [b for b in _bodies(shop.live.events(address)) if isinstance(b, ToolFinished)]
    assert finished.status == "unknown", finished
    assert len(shop.calls("ordering slow-tea")) == 1, "never sent again"


def test_an_ag_ui_run_resumes_the_question_with_its_answers(shop: Shop) -> None:
    address = _address("input-agui")
    shop.send(address)
    request = shop.asked(address).request_id
    run = {
        "threadId": address,
        "runId": "resume-1",
        "state": {},
        "messages": [],
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "resume": [
            {
                "interruptId": request,
                "status": "resolved",
                "payload": {"approve": True, "answers": {"quantity": {"quantity": 6}}},
            }
        ],
    }
    with shop.http.stream(
        "POST", "/v1/agui", json=run, headers={"Authorization": f"Bearer {shop.key}"}
    ) as streamed:
        assert streamed.status_code == 200
        text = "".join(streamed.iter_text())
    assert "RUN_FINISHED" in text
    assert "Ordered 6 tea." in text
    assert len(shop.calls(f"ordered tea 6 {address}/")) == 1


def test_a_deleted_agent_leaves_no_answered_leg_for_a_new_agent_at_its_address(
    shop: Shop,
) -> None:
    """Each answered leg of a call has a ledger entry of its own (`KEY/inputN`), holding
    the call's result: deleting the agent removes those too, so a new agent at the same
    address asks the server again and gets its own result, never the old agent's."""
    address = _address("input-deleted")
    shop.send(address)
    first = shop.asked(address).request_id
    shop.answer(address, first, {"approve": True, "answers": {"quantity": {"quantity": 3}}})
    assert shop.live.wait_for_turn_end(address, 1).reply == "Ordered 3 tea."
    headers = {"Authorization": f"Bearer {shop.key}"}
    deleted = shop.http.delete(f"/v1/agents/{address}", headers=headers)
    assert deleted.status_code == 200, deleted.text

    shop.send(address)
    again = shop.asked(address).request_id
    shop.answer(address, again, {"approve": True, "answers": {"quantity": {"quantity": 5}}})

    ended = shop.live.wait_for_turn_end(address, 1)
    assert ended.reply == "Ordered 5 tea.", ended
    assert len(shop.calls(f"ordered tea 5 {address}/")) == 1
