"""Reading invocations and journals through Restate's admin API, against a faked admin API
(`httpx.MockTransport`); tests/durable/test_journal.py reads a real one."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from services.stack.journal import (
    Invocation,
    JournalEntry,
    JournalError,
    RestateAdmin,
    Tally,
)

Handler = Callable[[httpx.Request], httpx.Response]

ROWS = [
    {"id": "inv_1a", "index": 0, "entry_type": "Command: Input", "name": None, "raw_length": 400},
    {"id": "inv_1a", "index": 1, "entry_type": "Command: Run", "name": "model", "raw_length": 15},
    {"id": "inv_1a", "index": 2, "entry_type": "Notification: Run", "name": "", "raw_length": 180},
    {"id": "inv_1a", "index": 3, "entry_type": "Command: Run", "name": "tool", "raw_length": 16},
    {"id": "inv_1a", "index": 4, "entry_type": "Notification: Run", "name": "", "raw_length": 90},
    {"id": "inv_1a", "index": 5, "entry_type": "Command: Output", "name": None, "raw_length": 60},
]


def admin(handler: Handler) -> RestateAdmin:
    return RestateAdmin("http://admin.test", transport=httpx.MockTransport(handler))


def answering(rows: list[dict[str, Any]], seen: list[httpx.Request]) -> Handler:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"rows": rows})

    return handle


def test_a_journal_is_read_in_index_order_and_tallied_by_type() -> None:
    seen: list[httpx.Request] = []
    with admin(answering(ROWS, seen)) as client:
        journal = client.journal("inv_1a")
    assert [entry.index for entry in journal.entries] == [0, 1, 2, 3, 4, 5]
    assert journal.entries[1] == JournalEntry(1, "Command: Run", "model", 15)
    assert journal.entries[0].name == ""  # SQL null
    assert journal.size == Tally(6, 761)
    assert journal.by_type() == {
        "Command: Input": Tally(1, 400),
        "Command: Output": Tally(1, 60),
        "Command: Run": Tally(2, 31),
        "Notification: Run": Tally(2, 270),
    }
    request = seen[0]
    assert (request.method, request.url.path) == ("POST", "/query")
    assert request.headers["accept"] == "application/json"
    sql = json.loads(request.content)["query"]
    assert "FROM sys_journal" in sql
    assert "WHERE id IN ('inv_1a')" in sql


def test_journals_of_several_invocations_come_back_in_the_order_asked() -> None:
    other = {**ROWS[0], "id": "inv_2b", "raw_length": 7}
    with admin(answering([*ROWS, other], [])) as client:
        journals = client.journals(["inv_2b", "inv_none", "inv_1a"])
    assert [j.invocation for j in journals] == ["inv_2b", "inv_none", "inv_1a"]
    assert [j.size for j in journals] == [Tally(1, 7), Tally(0, 0), Tally(6, 761)]


def test_an_invocation_without_a_journal_is_a_sentence() -> None:
    with admin(answering([], [])) as client, pytest.raises(JournalError, match="no journal"):
        client.journal("inv_1a")


def test_invocations_are_read_from_sys_invocation() -> None:
    rows = [
        {
            "id": "inv_1a",
            "target_service_name": "Agent",
            "target_handler_name": "wake",
            "status": "completed",
            "target_service_key": "acme.a",
            "invoked_by_id": None,
        }
    ]
    seen: list[httpx.Request] = []
    with admin(answering(rows, seen)) as client:
        found = client.invocations(["inv_1a"])
    assert found == [Invocation("inv_1a", "Agent", "wake", "completed", "acme.a", "")]
    sql = json.loads(seen[0].content)["query"]
    assert "FROM sys_invocation WHERE id IN ('inv_1a')" in sql


@pytest.mark.parametrize("bad", ["inv_1' OR '1'='1", "", "1a", "inv_1a; DROP"])
def test_only_invocation_ids_reach_the_sql(bad: str) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"no request should be sent, got {request.content!r}")

    with admin(refuse) as client, pytest.raises(ValueError, match="is not a Restate invocation id"):
        client.journal(bad)


def test_retaining_journals_patches_each_service() -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.method == "GET":
            return httpx.Response(200, json={"services": [{"name": "Model"}, {"name": "Agent"}]})
        return httpx.Response(200, json={})

    with admin(handle) as client:
        client.retain_journals(client.services())
    patches = [(r.method, r.url.path, json.loads(r.content)) for r in seen[1:]]
    assert patches == [
        ("PATCH", "/services/Agent", {"journal_retention": "1h"}),
        ("PATCH", "/services/Model", {"journal_retention": "1h"}),
    ]


def test_a_refused_query_is_a_sentence_quoting_restate() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, json={"message": "Schema error: No field named nope."})

    with admin(refuse) as client, pytest.raises(JournalError) as raised:
        client.query("SELECT nope FROM sys_invocation")
    assert str(raised.value).startswith("Restate's admin API answered POST /query with 500:")
    assert "No field named nope" in str(raised.value)


def test_an_admin_api_that_does_not_answer_is_a_sentence() -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with admin(down) as client, pytest.raises(JournalError, match="did not answer GET /services"):
        client.services()


def test_an_answer_without_rows_is_a_sentence() -> None:
    def odd(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>not the admin API</html>")

    with admin(odd) as client, pytest.raises(JournalError, match="answered a query with"):
        client.query("SELECT 1")


def invocation_row(invocation: str, service: str, status: str) -> dict[str, Any]:
    return {
        "id": invocation,
        "target_service_name": service,
        "target_handler_name": "h",
        "status": status,
    }


def test_what_a_turn_caused_is_returned_once_all_of_it_has_finished() -> None:
    answers = iter(
        [
            [
                invocation_row("inv_old", "Agent", "completed"),
                invocation_row("inv_new", "Agent", "running"),
            ],
            [
                invocation_row("inv_old", "Agent", "completed"),
                invocation_row("inv_new", "Agent", "completed"),
                invocation_row("inv_sent", "Projector", "inboxed"),
            ],
            [
                invocation_row("inv_old", "Agent", "completed"),
                invocation_row("inv_new", "Agent", "completed"),
                invocation_row("inv_sent", "Projector", "completed"),
            ],
        ]
    )

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"rows": next(answers)})

    with admin(handle) as client:
        made = client.finished_since({"inv_old"}, timeout=5.0, poll=0.0)
    assert [(i.id, i.target_service_name) for i in made] == [
        ("inv_new", "Agent"),
        ("inv_sent", "Projector"),
    ]


def test_invocations_that_never_finish_are_named_in_a_sentence() -> None:
    rows = [invocation_row("inv_new", "Projector", "backing-off")]
    with admin(answering(rows, [])) as client, pytest.raises(JournalError) as raised:
        client.finished_since(set(), timeout=0.05, poll=0.01)
    assert str(raised.value) == (
        "invocations still unfinished after 0.05 s: Projector (backing-off)."
    )
