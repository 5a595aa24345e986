"""Knowledge documents on a real stack (restate-server, the endpoint, the gateway): a draft
is never found, a released one is found within seconds, a deleted one never again; the
`search_docs` tool names a passage's document and position and a reply can quote it; a
key of another tenant is answered as if nothing were there; a rebuild of the projection
keeps the documents and an erasure of the tenant removes them."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from services.contracts import ADD_KEY, REBUILD, REBUILD_KEY, Empty
from services.executor.scripted import script
from services.ingress import Ingress
from services.keys import new_key
from services.stack import Stack, isolated_settings
from tests.durable.conftest import eventually
from tests.fixtures.pdf import encrypted, made_pdf
from tests.gateway.test_erasure import CREATED, TABLES, Live, _outputs_holding, _restate_rows

pytestmark = pytest.mark.durable

MARKER = "lynx-saffron-4410"
GUIDE = f"""# Harbour guide

Boats moor at the east pier.

## Tides

High tide at the {MARKER} buoy comes two hours after noon.
"""
SPEC = {
    "kind": "keeper",
    "instructions": "Follow the script.",
    "model": "script",
    "tools": ["search_docs"],
}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    settings = isolated_settings(tmp_path_factory.mktemp("knowledge-home"))
    with (
        Stack(settings),
        httpx.Client(base_url=f"http://127.0.0.1:{settings.gateway_port}", timeout=60) as http,
        contextlib.closing(Ingress(settings.ingress_url)) as ingress,
    ):
        yield Live(settings, http, ingress)


def upload(live: Live, auth: dict[str, str], text: str, **more: str) -> dict[str, Any]:
    body = {"title": "Harbour guide", "text": text, "format": "markdown", **more}
    made = live.http.post("/v1/knowledge", json=body, headers=auth)
    assert made.status_code in (200, 201), made.text
    document: dict[str, Any] = made.json()
    return document


def found(live: Live, auth: dict[str, str], query: str) -> list[dict[str, Any]]:
    answer = live.http.get("/v1/knowledge/search", params={"q": query}, headers=auth)
    assert answer.status_code == 200, answer.text
    hits: list[dict[str, Any]] = answer.json()["passages"]
    return hits


def listed(live: Live, auth: dict[str, str]) -> list[dict[str, Any]]:
    answer = live.http.get("/v1/knowledge", headers=auth)
    assert answer.status_code == 200, answer.text
    documents: list[dict[str, Any]] = answer.json()["documents"]
    return documents


def test_a_draft_is_never_found_released_is_found_deleted_is_gone(live: Live) -> None:
    acme = live.key("acme", "write")
    draft = upload(live, acme, GUIDE)
    assert (draft["status"], draft["tenant"], draft["passages"]) == ("draft", "acme", 0)
    assert found(live, acme, MARKER) == []
    again = live.http.post(
        "/v1/knowledge", json={"title": "Another name", "text": GUIDE}, headers=acme
    )
    assert (again.status_code, again.json()["id"]) == (200, draft["id"]), "the same text"

    released = live.http.post(f"/v1/knowledge/{draft['id']}/release", headers=acme)
    assert released.status_code == 200, released.text
    assert released.json()["status"] == "released"
    hits = eventually(lambda: found(live, acme, f"{MARKER} tide") or None, 5, "the release")
    assert [(h["document"], h["title"]) for h in hits] == [(draft["id"], "Harbour guide")]
    assert hits[0].keys() == {"document", "title", "passage"}, "no score of the shared index"
    passage = hits[0]["passage"]
    assert (passage["n"], passage["section"]) == (2, "Harbour guide > Tides")
    assert GUIDE[passage["start"] :].startswith(passage["text"])
    assert [d["status"] for d in listed(live, acme)] == ["released"]
    held = _restate_rows(live.settings, MARKER)
    assert (held["state"], held["sys_journal"]) == (1, 0), "its text, in its state alone"

    gone = live.http.delete(f"/v1/knowledge/{draft['id']}", headers=acme)
    assert gone.status_code == 200, gone.text
    assert gone.json()["id"] == draft["id"]
    assert found(live, acme, MARKER) == []
    assert listed(live, acme) == []
    assert live.http.get(f"/v1/knowledge/{draft['id']}", headers=acme).status_code == 404
    after = live.http.post(f"/v1/knowledge/{draft['id']}/release", headers=acme)
    assert after.status_code == 404
    assert _restate_rows(live.settings, MARKER) == dict.fromkeys(TABLES, 0)
    assert MARKER.encode() not in (live.settings.home / "projection.db").read_bytes()


def test_what_carries_text_keeps_no_journal_and_the_rest_keeps_a_day(live: Live) -> None:
    """restate-server keeps a finished invocation's journal for a day unless its service
    or handler says otherwise; what carries a document's or a memory's text, a prompt or
    a file says none."""
    services = {s["name"]: s for s in httpx.get(f"{live.settings.admin_url}/services").json()[
        "services"
    ]}  # fmt: skip
    kept = {name: service["journal_retention"] for name, service in services.items()}
    assert {name for name, retention in kept.items() if retention == "0s"} == {
        "Knowledge", "Memory", "Model", "Workspace",
    }  # fmt: skip
    assert {name for name, retention in kept.items() if retention != "0s"} >= {
        "Agent", "Projector", "Tenant", "Lifecycle",
    }  # fmt: skip
    assert {kept[name] for name in kept if kept[name] != "0s"} == {"1d"}
    handlers = {h["name"]: h.get("journal_retention") for h in services["Projector"]["handlers"]}
    assert (handlers["document"], handlers["memory"], handlers["events"]) == ("0s", "0s", None)

    # The Tenant object keeps its journals: its `add_key` input (a key's digest) is seen
    # there, so a journal holding a marker would be seen too.
    _, key = new_key("journaled", "write", CREATED)
    live.ingress.call(ADD_KEY, key, "journaled")
    assert _restate_rows(live.settings, key.hash)["sys_journal"] >= 1

    acme = live.key("acme", "write")
    memo = f"{MARKER}-memo"
    made = live.http.post("/v1/memory", json={"text": memo}, headers=acme)
    assert made.status_code == 201, made.text
    held = _restate_rows(live.settings, memo)
    assert (held["state"], held["sys_journal"]) == (1, 0)
    assert made.json()["text"] == memo, "the gateway answers the record whole"
    assert live.http.delete(f"/v1/memory/{made.json()['id']}", headers=acme).status_code == 204
    assert _restate_rows(live.settings, memo) == dict.fromkeys(TABLES, 0)
    assert _outputs_holding(live.settings, memo) == [], "no answer Restate keeps holds it"


def test_another_tenants_key_finds_nothing_and_is_answered_as_if_nothing_were_there(
    live: Live,
) -> None:
    acme, globex = live.key("acme", "write"), live.key("globex", "write")
    document = upload(live, acme, f"Only acme knows the {MARKER}-isolation word.")
    live.http.post(f"/v1/knowledge/{document['id']}/release", headers=acme)
    assert found(live, acme, f"{MARKER}-isolation")
    assert found(live, globex, f"{MARKER}-isolation") == []
    assert listed(live, globex) == []
    unknown = "doc" + "0" * 20
    for method, path in (
        ("GET", "/v1/knowledge/{}"),
        ("POST", "/v1/knowledge/{}/release"),
        ("DELETE", "/v1/knowledge/{}"),
    ):
        theirs = live.http.request(method, path.format(document["id"]), headers=globex)
        none = live.http.request(method, path.format(unknown), headers=globex)
        assert (theirs.status_code, none.status_code) == (404, 404), path
        assert theirs.json()["error"]["message"].replace(document["id"], "X") == none.json()[
            "error"
        ]["message"].replace(unknown, "X")
    assert found(live, acme, f"{MARKER}-isolation"), "still acme's"
    reader = live.key("acme", "read")
    refused = live.http.post("/v1/knowledge", json={"title": "t", "text": "x"}, headers=reader)
    assert refused.status_code == 403
    assert listed(live, reader)
    live.http.delete(f"/v1/knowledge/{document['id']}", headers=acme)


def turn_result(live: Live, auth: dict[str, str], address: str, query: str) -> tuple[str, str]:
    """A turn that calls `search_docs` and replies quoting what it found: the tool's
    result and the reply."""
    call = {"name": "search_docs", "arguments": {"query": query}}
    live.send(auth, address, script({"calls": [call]}, {"reply": "From the guide: {results}"}))
    events = live.ended(auth, address)
    results = [e["body"] for e in events if e["body"]["type"] == "tool_finished"]
    assert [r["status"] for r in results] == ["ok"], results
    ended = [e["body"] for e in events if e["body"]["type"] == "turn_ended"]
    return results[0]["content"], ended[0]["reply"]


def test_search_docs_names_the_passage_and_the_reply_quotes_it(live: Live) -> None:
    acme, globex = live.key("acme", "admin"), live.key("globex", "admin")
    for auth in (acme, globex):
        assert live.http.post("/v1/specs", json=SPEC, headers=auth).status_code == 201
    draft = upload(live, acme, GUIDE.replace("east", "west"))
    result, _ = turn_result(live, acme, "acme.early", f"{MARKER} tide")
    assert json.loads(result) == {"passages": []}, "a draft is never found"

    live.http.post(f"/v1/knowledge/{draft['id']}/release", headers=acme)
    result, reply = turn_result(live, acme, "acme.reader", f"{MARKER} tide")
    (hit,) = json.loads(result)["passages"]
    assert (hit["document"], hit["title"], hit["passage"]) == (draft["id"], "Harbour guide", 2)
    assert hit["section"] == "Harbour guide > Tides"
    assert f"High tide at the {MARKER} buoy" in hit["text"]
    assert f"High tide at the {MARKER} buoy" in reply
    assert draft["id"] in reply
    other, _ = turn_result(live, globex, "globex.reader", f"{MARKER} tide")
    assert json.loads(other) == {"passages": []}
    live.http.delete(f"/v1/knowledge/{draft['id']}", headers=acme)


def test_a_rebuild_keeps_the_documents_and_erasing_the_tenant_removes_them(
    live: Live,
) -> None:
    initech = live.key("initech", "admin")
    kept = upload(live, initech, f"The {MARKER}-erasure vault opens at nine.")
    live.http.post(f"/v1/knowledge/{kept['id']}/release", headers=initech)
    draft = upload(live, initech, f"A {MARKER}-erasure draft.")

    report = live.ingress.call(REBUILD, Empty(), REBUILD_KEY)
    assert report.documents == 2
    assert {d["id"]: d["status"] for d in listed(live, initech)} == {
        kept["id"]: "released",
        draft["id"]: "draft",
    }
    hits = found(live, initech, f"{MARKER}-erasure")
    assert [h["document"] for h in hits] == [kept["id"]]
    assert _restate_rows(live.settings, f"{MARKER}-erasure")["state"] == 2

    erased = live.http.delete("/v1/tenant", headers=initech)
    assert erased.status_code == 200, erased.text
    assert f"{MARKER}-erasure".encode() not in (live.settings.home / "projection.db").read_bytes()
    live.refused_key("initech")
    assert _restate_rows(live.settings, f"{MARKER}-erasure")["state"] == 0


def test_a_pdf_is_searched_by_its_pages_text_and_a_bad_one_is_refused(live: Live) -> None:
    acme = live.key("acme", "write")
    guide = made_pdf([
        ["Harbour guide", "Boats moor at the east pier."],
        ["Tides", f"High tide at the {MARKER}-pdf buoy comes two hours after noon."],
    ])  # fmt: skip

    def post(body: bytes, kind: str = "application/pdf") -> httpx.Response:
        return live.http.post(
            "/v1/knowledge/pdf", params={"title": "Harbour guide (PDF)"}, content=body,
            headers={**acme, "content-type": kind},
        )  # fmt: skip

    made = post(guide)
    assert made.status_code == 201, made.text
    document = made.json()
    assert (document["format"], document["status"]) == ("pdf", "draft")
    released = live.http.post(f"/v1/knowledge/{document['id']}/release", headers=acme)
    assert (released.status_code, released.json()["passages"]) == (200, 2)
    (hit,) = found(live, acme, f"{MARKER}-pdf")
    assert (hit["passage"]["n"], hit["passage"]["page"]) == (2, 2)
    assert hit["passage"]["text"].startswith("Tides\nHigh tide")
    assert post(guide).status_code == 200, "the same text is that document"

    refused = {
        "text/plain": post(guide, "text/plain"),
        "garbage": post(b"%PDF-1.7\n" + b"\x00" * 64),
        "encrypted": post(encrypted(guide, "s3cret")),
    }
    assert {name: r.status_code for name, r in refused.items()} == {
        "text/plain": 415, "garbage": 422, "encrypted": 422,
    }  # fmt: skip
    assert refused["encrypted"].json()["error"]["message"] == (
        "The PDF is encrypted with a password: upload it without one."
    )
    assert refused["garbage"].json()["error"]["message"].startswith("The PDF cannot be read: ")
    gone = live.http.delete(f"/v1/knowledge/{document['id']}", headers=acme)
    assert gone.status_code == 200, gone.text
