"""Memory through the API on a real stack (restate-server, the endpoint, the gateway):
a scope's records are found by its own tenant's keys only, a key of another tenant is
answered as if nothing were there, and forgetting a user's memories leaves their text in
no search, no listing and no row of Restate's `state` table; a rebuild of the projection
brings every record back, and none of those forgotten."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from schemas.memory import MemoryPage, MemoryScope
from services.contracts import MEMORY_RECORDS, REBUILD, REBUILD_KEY, Empty
from services.executor.scripted import script
from services.ingress import Ingress
from services.stack import Stack, isolated_settings
from tests.gateway.test_erasure import Live, _restate_rows

pytestmark = pytest.mark.durable

MARKER = "heron-cobalt-5521"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    settings = isolated_settings(tmp_path_factory.mktemp("memory-home"))
    with (
        Stack(settings),
        httpx.Client(base_url=f"http://127.0.0.1:{settings.gateway_port}", timeout=60) as http,
        contextlib.closing(Ingress(settings.ingress_url)) as ingress,
    ):
        yield Live(settings, http, ingress)


def found(live: Live, auth: dict[str, str], query: str, **scope: str) -> list[dict[str, Any]]:
    answer = live.http.get("/v1/memory", params={"q": query, **scope}, headers=auth)
    assert answer.status_code == 200, answer.text
    hits: list[dict[str, Any]] = answer.json()["memories"]
    return hits


def remember(live: Live, auth: dict[str, str], text: str, **scope: str) -> dict[str, Any]:
    made = live.http.post("/v1/memory", json={"text": text, **scope}, headers=auth)
    assert made.status_code == 201, made.text
    record: dict[str, Any] = made.json()
    return record


def test_a_users_memories_are_theirs_within_their_tenant_and_forgotten_everywhere(
    live: Live,
) -> None:
    acme, globex = live.key("acme", "write"), live.key("globex", "write")
    u1 = {"scope": "user", "user": "u1"}
    mine = remember(live, acme, f"prefers short answers {MARKER}", **u1)
    assert mine["scope"] == {"tenant": "acme", "kind": "user", "owner": "u1"}
    remember(live, acme, "prefers long answers", scope="user", user="v1")
    remember(live, acme, "the office closes at six")

    hits = found(live, acme, "short answers", **u1)
    assert [h["record"]["id"] for h in hits] == [mine["id"]]
    assert hits[0].keys() == {"record"}, "no score of the shared index"
    assert found(live, acme, MARKER, scope="user", user="v1") == []
    assert found(live, acme, MARKER) == []  # the tenant's own scope is another scope
    # Another tenant's key, the same user id: nothing there, and nothing to delete.
    assert found(live, globex, MARKER, **u1) == []
    listed = live.http.get("/v1/memory", params=u1, headers=globex)
    assert listed.json() == {"memories": []}
    theirs = live.http.delete(f"/v1/memory/{mine['id']}", params=u1, headers=globex)
    unknown = live.http.delete("/v1/memory/mem" + "0" * 20, params=u1, headers=globex)
    assert (theirs.status_code, unknown.status_code) == (404, 404)
    assert theirs.json()["error"]["message"].replace(mine["id"], "X") == unknown.json()["error"][
        "message"
    ].replace("mem" + "0" * 20, "X")
    assert found(live, acme, "short answers", **u1) != []

    assert _restate_rows(live.settings, MARKER)["state"] == 1
    gone = live.http.delete("/v1/memory", params=u1, headers=acme)
    assert gone.status_code == 204, gone.text
    assert found(live, acme, MARKER, **u1) == []
    assert live.http.get("/v1/memory", params=u1, headers=acme).json() == {"memories": []}
    assert _restate_rows(live.settings, MARKER)["state"] == 0
    assert [h["record"]["text"] for h in found(live, acme, "office")] == [
        "the office closes at six"
    ]


def test_one_record_is_forgotten_and_bad_scopes_are_sentences(live: Live) -> None:
    acme = live.key("acme", "write")
    record = remember(live, acme, "a fact about kestrels", kind="semantic")
    assert live.http.delete(f"/v1/memory/{record['id']}", headers=acme).status_code == 204
    assert found(live, acme, "kestrels") == []
    missing = live.http.post("/v1/memory", json={"text": "x", "scope": "user"}, headers=acme)
    assert missing.status_code == 400
    assert "needs `user`" in missing.json()["error"]["message"]
    foreign = live.http.get(
        "/v1/memory", params={"scope": "agent", "agent": "globex.bot"}, headers=acme
    )
    assert foreign.status_code == 404
    reader = live.key("acme", "read")
    assert live.http.post("/v1/memory", json={"text": "x"}, headers=reader).status_code == 403


def test_a_rebuild_brings_back_every_record_and_none_forgotten(live: Live) -> None:
    umbrella = live.key("umbrella", "write")
    u1, u2 = {"scope": "user", "user": "u1"}, {"scope": "user", "user": "u2"}
    kept = [
        remember(live, umbrella, "the lab opens at seven", kind="semantic"),
        remember(live, umbrella, "the lab keeps spare goggles"),
        remember(live, umbrella, "u1 likes tables in answers", **u1),
    ]
    dropped = remember(live, umbrella, "the lab code is 4471")
    assert live.http.delete(f"/v1/memory/{dropped['id']}", headers=umbrella).status_code == 204
    remember(live, umbrella, "u2 lives in Raccoon City", **u2)
    assert live.http.delete("/v1/memory", params=u2, headers=umbrella).status_code == 204
    tenant_list = live.http.get("/v1/memory", headers=umbrella).json()
    user_list = live.http.get("/v1/memory", params=u1, headers=umbrella).json()

    report = live.ingress.call(REBUILD, Empty(), REBUILD_KEY)

    assert report.memories >= len(kept)
    assert live.http.get("/v1/memory", headers=umbrella).json() == tenant_list
    assert live.http.get("/v1/memory", params=u1, headers=umbrella).json() == user_list
    assert [h["record"]["id"] for h in found(live, umbrella, "opens seven")] == [kept[0]["id"]]
    assert [h["record"]["id"] for h in found(live, umbrella, "goggles")] == [kept[1]["id"]]
    assert [h["record"]["id"] for h in found(live, umbrella, "tables", **u1)] == [kept[2]["id"]]
    assert found(live, umbrella, "code 4471") == []
    assert found(live, umbrella, "Raccoon City", **u2) == []
    assert live.http.get("/v1/memory", params=u2, headers=umbrella).json() == {"memories": []}


def test_a_scopes_records_are_read_back_a_page_at_a_time(live: Live) -> None:
    stark = live.key("stark", "write")
    made = sorted(remember(live, stark, f"armour note {n}")["id"] for n in range(3))
    key = MemoryScope("stark", "tenant").key

    first = live.ingress.call(MEMORY_RECORDS, MemoryPage(limit=2), key)
    rest = live.ingress.call(MEMORY_RECORDS, MemoryPage(first.records[-1].id, 2), key)

    assert ([r.id for r in first.records], first.more) == (made[:2], True)
    assert ([r.id for r in rest.records], rest.more) == (made[2:], False)


SPEC = {
    "kind": "keeper",
    "instructions": "Follow the script.",
    "model": "script",
    "tools": ["remember", "search_memory"],
}


def turn(live: Live, auth: dict[str, str], address: str, text: str, turns: int) -> str:
    live.send(auth, address, text)
    events = live.ended(auth, address, turns)
    results = [e["body"] for e in events if e["body"]["type"] == "tool_finished"]
    assert results, events
    assert results[-1]["status"] == "ok", results[-1]
    content: str = results[-1]["content"]
    return content


def test_the_memory_tools_keep_to_the_agents_scopes_and_tenant(live: Live) -> None:
    acme, globex = live.key("acme", "admin"), live.key("globex", "admin")
    for auth in (acme, globex):
        assert live.http.post("/v1/specs", json=SPEC, headers=auth).status_code == 201

    def keep(text: str, scope: str) -> str:
        call = {"name": "remember", "arguments": {"text": text, "scope": scope}}
        return script({"calls": [call]}, {"reply": "kept"})

    def look(query: str) -> str:
        call = {"name": "search_memory", "arguments": {"query": query}}
        return script({"calls": [call]}, {"reply": "looked"})

    turn(live, acme, "acme.writer", keep("the shared pelican-ochre-3380 fact", "tenant"), 1)
    turn(live, acme, "acme.writer", keep("my own wombat-umber-1170 note", "agent"), 2)
    assert "pelican-ochre-3380" in turn(live, acme, "acme.reader", look("pelican ochre"), 1)
    assert "wombat" not in turn(live, acme, "acme.reader", look("wombat umber"), 2)
    assert "wombat-umber-1170" in turn(live, acme, "acme.writer", look("wombat umber"), 3)
    assert turn(live, globex, "globex.reader", look("pelican ochre wombat"), 1) == (
        '{"memories":[]}'
    )
    # The API sees what the tool kept, in the same scopes.
    assert found(live, acme, "pelican")
    assert found(live, acme, "wombat", scope="agent", agent="acme.writer")
    assert found(live, globex, "pelican") == []


def model_messages(live: Live, auth: dict[str, str], address: str) -> list[dict[str, Any]]:
    events = live.timeline(auth, address)
    return [e["body"] for e in events if e["body"]["type"] == "model_message"]


def test_a_turn_is_shown_its_scopes_most_relevant_memories_and_never_anothers(
    live: Live,
) -> None:
    acme, globex = live.key("acme", "admin"), live.key("globex", "admin")
    for auth in (acme, globex):
        assert live.http.post("/v1/specs", json=SPEC, headers=auth).status_code == 201
    lark = remember(live, acme, "the lark-sienna-4410 gate code is 7")
    finch = remember(live, acme, "the finch-teal-2290 printer is upstairs")
    remember(live, acme, "larks sing", scope="agent", agent="acme.other")
    live.send(acme, "acme.asker", "What is the lark-sienna-4410 gate code?")
    live.ended(acme, "acme.asker", 1)
    live.send(acme, "acme.asker", "Where is the finch-teal-2290 printer?")
    live.ended(acme, "acme.asker", 2)
    first, second = model_messages(live, acme, "acme.asker")
    assert first["memories"] == [lark["id"]]
    assert second["memories"] == [finch["id"]]
    # Different memories, the same stable prefix (instructions and tools).
    assert first["fingerprint"] == second["fingerprint"]
    live.send(globex, "globex.asker", "What is the lark-sienna-4410 gate code?")
    live.ended(globex, "globex.asker", 1)
    assert [m["memories"] for m in model_messages(live, globex, "globex.asker")] == [[]]
    assert live.http.delete(f"/v1/memory/{lark['id']}", headers=acme).status_code == 204
    live.send(acme, "acme.asker", "What is the lark-sienna-4410 gate code?")
    live.ended(acme, "acme.asker", 3)
    assert model_messages(live, acme, "acme.asker")[-1]["memories"] == []


GONE = "ibis-carmine-6603"


def test_erasing_an_agent_or_a_tenant_erases_their_memories_everywhere(live: Live) -> None:
    initech = live.key("initech", "admin")
    assert live.http.post("/v1/specs", json=SPEC, headers=initech).status_code == 201
    live.send(initech, "initech.bot", "hello")
    live.ended(initech, "initech.bot")
    remember(live, initech, f"agent note {GONE}", scope="agent", agent="initech.bot")
    kept = remember(live, initech, f"tenant note {GONE}")
    remember(live, initech, f"user note {GONE}", scope="user", user="u9")
    assert _restate_rows(live.settings, GONE)["state"] == 3

    deleted = live.http.delete("/v1/agents/initech.bot", headers=initech)
    assert deleted.status_code == 200, deleted.text
    assert found(live, initech, GONE, scope="agent", agent="initech.bot") == []
    assert [h["record"]["id"] for h in found(live, initech, GONE)] == [kept["id"]]
    assert _restate_rows(live.settings, GONE)["state"] == 2

    erased = live.http.delete("/v1/tenant", headers=initech)
    assert erased.status_code == 200, erased.text
    assert GONE not in erased.text
    assert _restate_rows(live.settings, GONE)["state"] == 0
    assert GONE.encode() not in (live.settings.home / "projection.db").read_bytes()
    live.refused_key("initech")
