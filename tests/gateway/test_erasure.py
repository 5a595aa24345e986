"""Deleting agents and erasing a tenant on a real stack (restate-server, the endpoint, the
gateway): afterwards a marker the tenant's messages, tool results and workspace files held
is found by no API, in no row of Restate's state or of the projection, in no workspace,
artifact or log; another tenant's agents are untouched. Forking through the gateway too."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from schemas.effects import Finished
from schemas.harness import ToolResult
from schemas.knowledge import DocumentUpload
from schemas.memory import MemoryNote, MemoryScope
from schemas.tenant import Scope
from schemas.wake import Message
from services.contracts import (
    ADD_KEY,
    EFFECTS,
    ERASURES,
    KNOWLEDGE,
    MEMORY,
    PROJECTOR,
    REMEMBER,
    TENANT,
    UPLOAD_DOCUMENT,
    Empty,
)
from services.effects.ledger import RestateLedger, ledger_key
from services.executor.scripted import script
from services.ingress import Ingress, IngressError
from services.keys import new_key
from services.lifecycle.restate_admin import RestateAdminApi
from services.projection.store import ProjectionStore
from services.settings import Settings
from services.stack import Stack, isolated_settings
from tests.durable.conftest import eventually

pytestmark = pytest.mark.durable

CREATED = datetime(2026, 12, 1, tzinfo=UTC)
MARKER = "zebra-quartz-7731"
ERASED = "Tenant {} was erased: nothing can be made in it again, keys included."
OTHER = "otter-basalt-1947"
TABLES = (
    "state",
    "sys_invocation",
    "sys_journal",
    "sys_journal_events",
    "sys_inbox",
    "sys_promise",
)
SPEC = {
    "kind": "keeper",
    "instructions": "Follow the script.",
    "model": "script",
    "tools": ["write_file", "read_file"],
    "workspace": {"quota_mb": 16},
    "can_spawn": True,
}


def keeping(marker: str) -> str:
    """A turn that writes the marker to a file, reads it back and replies with it."""
    return script(
        {"calls": [{"name": "write_file", "arguments": {"path": "n.txt", "content": marker}}]},
        {"calls": [{"name": "read_file", "arguments": {"path": "n.txt"}}]},
        {"reply": f"{marker}: {{results}}"},
    )


class Live:
    def __init__(self, settings: Settings, http: httpx.Client, ingress: Ingress) -> None:
        self.settings, self.http, self.ingress = settings, http, ingress

    def key(self, tenant: str, scope: Scope = "admin") -> dict[str, str]:
        plaintext, key = new_key(tenant, scope, CREATED)
        self.ingress.call(ADD_KEY, key, tenant)
        auth = {"Authorization": f"Bearer {plaintext}"}
        eventually(
            lambda: self.http.get("/v1/me", headers=auth).status_code == 200 or None,
            60,
            "a new key to work",
        )
        return auth

    def refused_key(self, tenant: str) -> None:
        """A new key of an erased tenant is refused, 410, with the tombstone's sentence."""
        with pytest.raises(IngressError) as refused:
            self.ingress.call(ADD_KEY, new_key(tenant, "admin", CREATED)[1], tenant)
        assert (refused.value.status, refused.value.message) == (410, ERASED.format(tenant))

    def send(self, auth: dict[str, str], address: str, text: str) -> None:
        body = {"text": text, "kind": "keeper"}
        sent = self.http.post(f"/v1/agents/{address}/messages", json=body, headers=auth)
        assert sent.status_code == 202, sent.text

    def timeline(self, auth: dict[str, str], address: str) -> list[dict[str, Any]]:
        page = self.http.get(f"/v1/agents/{address}/timeline?limit=500", headers=auth)
        assert page.status_code == 200, page.text
        events: list[dict[str, Any]] = page.json()["events"]
        return events

    def ended(self, auth: dict[str, str], address: str, turns: int = 1) -> list[dict[str, Any]]:
        def done() -> list[dict[str, Any]] | None:
            events = self.timeline(auth, address)
            ends = [e for e in events if e["body"]["type"] == "turn_ended"]
            return events if len(ends) >= turns else None

        return eventually(done, 120, f"{address}'s turn {turns} to end")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    settings = isolated_settings(tmp_path_factory.mktemp("erasure-home"), model_context=2048)
    with (
        Stack(settings),
        httpx.Client(base_url=f"http://127.0.0.1:{settings.gateway_port}", timeout=60) as http,
        contextlib.closing(Ingress(settings.ingress_url)) as ingress,
    ):
        stack = Live(settings, http, ingress)
        for tenant in ("acme", "other"):
            published = http.post("/v1/specs", json=SPEC, headers=stack.key(tenant))
            assert published.status_code == 201, published.text
        yield stack


def _files_holding(root: Path, marker: str) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            with contextlib.suppress(OSError):
                if marker.encode() in path.read_bytes():
                    found.append(str(path.relative_to(root)))
    return found


BINARY = ("raw", "value")
"""Columns Restate's SQL answers in hex: a journal entry as encoded, a state value."""


def _row_text(row: dict[str, Any]) -> str:
    """A row as text, its hex columns decoded: a journal entry's payload is in `raw` (its
    `entry_json` spells the payload's bytes as numbers), so a marker is seen there too."""
    decoded = []
    for column in BINARY:
        value = row.get(column)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                decoded.append(bytes.fromhex(value).decode(errors="replace"))
    return "\n".join([json.dumps(row, default=str), *decoded])


def _restate_rows(settings: Settings, marker: str) -> dict[str, int]:
    """Rows of Restate's tables (its SQL) whose text, or decoded bytes, hold the marker."""
    admin = RestateAdminApi(settings.admin_url)
    try:
        found = {}
        for table in TABLES:
            rows = admin.query(f"select * from {table}")  # noqa: S608 - the test's own names
            found[table] = sum(marker in _row_text(row) for row in rows)
        return found
    finally:
        admin.close()


def _outputs_holding(settings: Settings, marker: str) -> list[str]:
    """The invocations whose answer Restate ingress still gives (a finished one sent with
    an idempotency key keeps it for the idempotency retention) holding the marker."""
    admin = RestateAdminApi(settings.admin_url)
    try:
        rows = admin.query("select id from sys_invocation where status = 'completed'")
    finally:
        admin.close()
    held = []
    with httpx.Client(base_url=settings.ingress_url, timeout=30) as ingress:
        for row in rows:
            answer = ingress.get(f"/restate/invocation/{row['id']}/output")
            if answer.status_code == 200 and marker in answer.text:
                held.append(str(row["id"]))
    return held


def _agents_counted(settings: Settings, tenant: str) -> int:
    admin = RestateAdminApi(settings.admin_url)
    try:
        rows = admin.query(
            "select value_utf8 from state where service_name = 'TenantUsage'"  # noqa: S608
            f" and service_key = '{tenant}' and key = 'agents'"
        )
    finally:
        admin.close()
    return int(rows[0]["value_utf8"]) if rows else 0


def _projection_holds(settings: Settings, marker: str) -> bool:
    async def read() -> bool:
        store = await ProjectionStore.open(settings.home / "projection.db", readonly=True)
        try:
            return marker in repr(await store.dump())
        finally:
            await store.close()

    return asyncio.run(read())


def _keeps_the_marker_in_its_objects(live: Live, auth: dict[str, str]) -> None:
    """The tenant's spec, a released document and memories hold the marker: its `Tenant`,
    `Knowledge` and `Memory` objects, and the `Projector`'s tenant key that projected them
    (the spec's invocation keeps its journal); one scope's records are all forgotten."""
    marked = {**SPEC, "kind": "marked", "instructions": f"Mention {MARKER}."}
    assert live.http.post("/v1/specs", json=marked, headers=auth).status_code == 201
    body = {"title": "Notes", "text": f"The {MARKER} notes."}
    document = live.http.post("/v1/knowledge", json=body, headers=auth)
    assert document.status_code == 201, document.text
    released = live.http.post(f"/v1/knowledge/{document.json()['id']}/release", headers=auth)
    assert released.status_code == 200, released.text
    kept = live.http.post("/v1/memory", json={"text": f"kept {MARKER}"}, headers=auth)
    assert kept.status_code == 201, kept.text
    mine = {"scope": "user", "user": "u9"}
    forgotten = live.http.post("/v1/memory", json={"text": f"gone {MARKER}", **mine}, headers=auth)
    assert forgotten.status_code == 201, forgotten.text
    gone = live.http.delete(f"/v1/memory/{forgotten.json()['id']}", params=mine, headers=auth)
    assert gone.status_code == 204, gone.text


def _invocations_of(settings: Settings, tenant: str) -> dict[str, tuple[str, str]]:
    """The invocations Restate knows of (finished ones too) of the objects keyed by the
    tenant (`Projector`, `Knowledge`, `Tenant`) or by one of its memory scopes: id →
    (service, key)."""
    admin = RestateAdminApi(settings.admin_url)
    try:
        rows = admin.query("select id, target_service_name, target_service_key from sys_invocation")
    finally:
        admin.close()
    found = {}
    for row in rows:
        service, key = str(row["target_service_name"]), str(row["target_service_key"] or "")
        if (key == tenant and service in (PROJECTOR, KNOWLEDGE, TENANT)) or (
            service == MEMORY and key.startswith(f"{tenant}:")
        ):
            found[str(row["id"])] = (service, key)
    return found


def test_erasing_a_tenant_leaves_its_marker_nowhere_and_another_tenant_untouched(
    live: Live, record_property: Any
) -> None:
    acme, other = live.key("acme"), live.key("other")
    live.send(acme, "acme.keeper", keeping(MARKER))
    live.send(other, "other.keeper", keeping(OTHER))
    live.send(acme, "acme.sleeper", keeping(MARKER))
    live.ended(acme, "acme.keeper")
    kept = live.ended(other, "other.keeper")
    live.ended(acme, "acme.sleeper")
    archived = live.http.post("/v1/agents/acme.sleeper/archive", headers=acme)
    assert archived.status_code == 200, archived.text
    assert live.http.get("/v1/agents/acme.sleeper", headers=acme).json()["status"] == "archived"
    listed = live.http.get("/v1/agents?status=archived", headers=acme).json()["agents"]
    assert [a["address"] for a in listed] == ["acme.sleeper"]
    live.send(acme, "acme.busy", script({"sleep": 60, "reply": f"{MARKER} late"}))
    eventually(
        lambda: (
            any(e["body"]["type"] == "model_message" for e in live.timeline(acme, "acme.busy"))
            or live.http.get("/v1/agents/acme.busy", headers=acme).json().get("status") == "running"
            or None
        ),
        60,
        "acme.busy to be running",
    )
    live.send(acme, "acme.busy", f"queued {MARKER}")
    _keeps_the_marker_in_its_objects(live, acme)
    home = live.settings.home
    assert _files_holding(home / "workspaces", MARKER)
    assert _files_holding(home / "archive", MARKER)
    held = _restate_rows(live.settings, MARKER)
    assert held["state"] > 0
    assert held["sys_journal"] > 0, "the agents' finished wakes keep their journals a day"
    keyed = _invocations_of(live.settings, "acme")
    assert {service for service, _ in keyed.values()} >= {PROJECTOR, MEMORY}

    erased = live.http.delete("/v1/tenant", headers=acme)

    assert erased.status_code == 200, erased.text
    record = erased.json()
    assert (record["what"], record["target"]) == ("tenant", "acme")
    assert set(record["agents"]) == {"acme.keeper", "acme.busy", "acme.sleeper"}
    assert record["archived"] == 1
    assert MARKER not in erased.text
    assert live.http.get("/v1/agents", headers=acme).status_code == 401
    live.refused_key("acme")
    for address in ("acme.keeper", "acme.busy", "acme.sleeper"):
        assert live.ingress.timeline(address).events == ()
    assert not _projection_holds(live.settings, "acme.")
    assert _restate_rows(live.settings, MARKER) == dict.fromkeys(TABLES, 0)
    assert _outputs_holding(live.settings, MARKER) == []
    assert set(_invocations_of(live.settings, "acme")) & set(keyed) == set(), "purged"
    assert not _projection_holds(live.settings, MARKER)
    for place in ("workspaces", "artifacts", "archive", "logs"):
        assert _files_holding(home / place, MARKER) == [], place
    assert MARKER.encode() not in (home / "projection.db").read_bytes()
    left = _files_holding(home / "restate", MARKER)
    record_property("restate files still holding the marker", left)
    print("restate files still holding the marker:", left)  # noqa: T201
    records = live.ingress.call(ERASURES, Empty(), "acme").records
    # The record forgotten through the memory API is in the list too, by its id alone.
    assert [(r.what, r.target) for r in records] == [
        ("memory", "acme:user:u9"),
        ("tenant", "acme"),
    ]
    assert records[0].memory_id.startswith("mem")
    assert records[0].by
    assert MARKER not in msgspec.json.encode(records[0]).decode()

    # The other tenant: its timeline, its workspace and its marker are where they were.
    assert live.timeline(other, "other.keeper") == kept
    assert _files_holding(home / "workspaces", OTHER)
    assert _restate_rows(live.settings, OTHER)["state"] > 0
    live.send(other, "other.keeper", "still here?")
    live.ended(other, "other.keeper", turns=2)


def test_deleting_an_agent_removes_it_and_what_it_spawned_alone(live: Live) -> None:
    other = live.key("other")
    child = "other.gone.t1r1c0"
    parent = script(
        {"calls": [{"name": "spawn_agent", "arguments": {"task": keeping(f"{child}-{MARKER}")}}]},
        {"calls": [{"name": "wait"}]},
        {"reply": "the child said: {results}"},
    )
    live.send(other, "other.gone", parent)
    live.send(other, "other.stays", keeping(f"other.stays-{MARKER}"))
    live.ended(other, "other.stays")
    live.ended(other, child)
    live.ended(other, "other.gone")
    home = live.settings.home
    assert _files_holding(home / "workspaces", f"{child}-{MARKER}")

    counted = _agents_counted(live.settings, "other")
    deleted = live.http.delete("/v1/agents/other.gone", headers=other)

    assert deleted.status_code == 200, deleted.text
    eventually(
        lambda: _agents_counted(live.settings, "other") == counted - 2 or None,
        30,
        "the tenant's count to give both agents back",
    )
    assert deleted.json()["agents"] == ["other.gone", child]
    for gone in ("other.gone", child):
        assert live.http.get(f"/v1/agents/{gone}", headers=other).status_code == 404
    assert _files_holding(home / "workspaces", f"{child}-{MARKER}") == []
    assert _restate_rows(live.settings, f"{child}-{MARKER}") == dict.fromkeys(TABLES, 0)
    assert live.http.get("/v1/agents/other.stays", headers=other).status_code == 200
    rows = _restate_rows(live.settings, f"other.gone-{MARKER}")
    assert rows["state"] == 0
    assert _restate_rows(live.settings, f"other.stays-{MARKER}")["state"] > 0
    write = live.http.delete("/v1/agents/other.stays", headers=live.key("other", "write"))
    assert write.status_code == 403


def test_a_fork_through_the_gateway(live: Live) -> None:
    other = live.key("other")
    live.send(other, "other.origin", "hello")
    events = live.ended(other, "other.origin")

    forked = live.http.post(
        "/v1/agents/other.origin/fork", json={"seq": 1, "address": "other.branch"}, headers=other
    )

    assert forked.status_code == 201, forked.text
    assert forked.json()["last_seq"] == 2
    branch = live.timeline(other, "other.branch")
    assert [e["body"] for e in branch[:1]] == [e["body"] for e in events[:1]]
    assert branch[1]["body"]["type"] == "agent_forked"
    again = live.http.post(
        "/v1/agents/other.origin/fork", json={"seq": 1, "address": "other.branch"}, headers=other
    )
    assert again.status_code == 409
    live.send(other, "other.shelved", "hello")
    live.ended(other, "other.shelved")
    assert live.http.post("/v1/agents/other.shelved/archive", headers=other).status_code == 200
    onto = live.http.post(
        "/v1/agents/other.origin/fork", json={"seq": 1, "address": "other.shelved"}, headers=other
    )
    assert onto.status_code == 409, onto.text
    assert "other.shelved is an archived agent" in onto.json()["error"]["message"]
    foreign = live.http.post(
        "/v1/agents/other.origin/fork", json={"seq": 1, "address": "acme.branch"}, headers=other
    )
    assert foreign.status_code == 404


def _held_under(settings: Settings, tenant: str) -> set[tuple[str, str]]:
    """(service, key) of every object holding state keyed by the tenant or under it."""
    admin = RestateAdminApi(settings.admin_url)
    try:
        rows = admin.query(
            "select distinct service_name, service_key from state"  # noqa: S608
            f" where starts_with(service_key, '{tenant}')"
        )
    finally:
        admin.close()
    return {(str(r["service_name"]), str(r["service_key"])) for r in rows}


def _unfinished_wakes(settings: Settings, tenant: str) -> int:
    admin = RestateAdminApi(settings.admin_url)
    try:
        rows = admin.query(
            "select id from sys_invocation where target_service_name = 'Agent'"  # noqa: S608
            f" and starts_with(target_service_key, '{tenant}.') and status != 'completed'"
        )
    finally:
        admin.close()
    return len(rows)


def test_agents_made_while_a_tenant_is_erased_do_not_survive_it(live: Live) -> None:
    """Messages to new addresses of the tenant keep arriving (straight through ingress, as
    a gateway with a cached key would send them) before, during and after its erasure:
    none of those agents is left, a wake that makes one once the erasure has begun is
    refused with the tombstone's sentence, and neither a key nor an agent can be made in
    the tenant afterwards."""
    racer = live.key("racer")
    assert live.http.post("/v1/specs", json=SPEC, headers=racer).status_code == 201
    live.send(racer, "racer.first", "hello")
    live.ended(racer, "racer.first")
    stop, sent = threading.Event(), list[str]()

    def make_agents() -> None:
        with contextlib.closing(Ingress(live.settings.ingress_url)) as ingress:
            while not stop.is_set():
                address = f"racer.new{len(sent)}"
                ingress.send_message(address, Message("hello", kind="keeper"))
                sent.append(address)
                stop.wait(0.05)

    maker = threading.Thread(target=make_agents)
    maker.start()
    try:
        eventually(lambda: len(sent) >= 5 or None, 30, "agents being made")
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            erasing = pool.submit(live.http.delete, "/v1/tenant", headers=racer)
            eventually(lambda: _tombstone(live.settings, "racer") or None, 30, "the tombstone")
            with pytest.raises(IngressError) as refused:
                live.ingress.wake("racer.during", Message("hello", kind="keeper"))
            erasing_now = ERASED.format("racer").replace("was erased", "is being erased")
            assert (refused.value.status, refused.value.message) == (410, erasing_now)
            # 410 while the gateway's cache still holds the key, 401 once it looked again
            for path, body in (
                ("/v1/agents/racer.gateway/messages", {"text": "hi", "kind": "keeper"}),
                ("/v1/memory", {"text": "a late note"}),
                ("/v1/knowledge", {"title": "Late", "text": "A late document."}),
            ):
                through = live.http.post(path, json=body, headers=racer)
                assert through.status_code in (401, 410), through.text
                assert through.json()["error"]["message"] == erasing_now
            erased = erasing.result(timeout=300)
        after = len(sent)
        eventually(lambda: len(sent) >= after + 5 or None, 30, "agents sent to afterwards")
    finally:
        stop.set()
        maker.join()

    assert erased.status_code == 200, erased.text
    assert "racer.first" in erased.json()["agents"]
    eventually(lambda: _unfinished_wakes(live.settings, "racer") == 0 or None, 60, "wakes to end")
    assert _held_under(live.settings, "racer") == {("Lifecycle", "racer")}
    assert not _projection_holds(live.settings, "racer.")
    with pytest.raises(IngressError) as late:
        live.ingress.wake("racer.late", Message("hello", kind="keeper"))
    assert (late.value.status, late.value.message) == (410, ERASED.format("racer"))
    # a note or a document sent before the tombstone, run only now, is refused the same
    scope = MemoryScope("racer", "user", "u-late")
    with pytest.raises(IngressError) as note:
        live.ingress.call(REMEMBER, MemoryNote(scope, "episodic", "a late note"), scope.key)
    assert (note.value.status, note.value.message) == (410, ERASED.format("racer"))
    with pytest.raises(IngressError) as upload:
        live.ingress.call(UPLOAD_DOCUMENT, DocumentUpload("Late", "text", "Late."), "racer")
    assert (upload.value.status, upload.value.message) == (410, ERASED.format("racer"))
    live.refused_key("racer")
    answer = live.http.post(
        "/v1/agents/racer.late/messages", json={"text": "hi", "kind": "keeper"}, headers=racer
    )
    assert answer.status_code == 401, answer.text
    assert _held_under(live.settings, "racer") == {("Lifecycle", "racer")}


def _tombstone(settings: Settings, tenant: str) -> bool:
    admin = RestateAdminApi(settings.admin_url)
    try:
        rows = admin.query(
            "select key from state where service_name = 'Lifecycle'"  # noqa: S608
            f" and service_key = '{tenant}' and key = 'tombstone'"
        )
    finally:
        admin.close()
    return bool(rows)


def test_an_erasure_finds_the_effect_entries_in_restate_not_only_in_the_projection(
    live: Live,
) -> None:
    """Entries of side-effecting calls the projection does not show (begun as a workspace
    command's step begins them, no event of theirs projected): deleting an agent removes
    its own, erasing the tenant the rest; another tenant's stays."""
    auth = live.key("ledger")
    assert live.http.post("/v1/specs", json=SPEC, headers=auth).status_code == 201
    for agent in ("ledger.a", "ledger.b"):
        live.send(auth, agent, "hello")
        live.ended(auth, agent)
    calls = ("ledger.a/t7/r1/call_9", "ledger.a.t1r1c0/t1/r1/call_0", "ledger.b/t7/r1/call_9")
    keep = "other.keeper/t9/r1/call_9"
    ledger = RestateLedger(live.settings.ingress_url)
    try:
        for call in (*calls, keep):
            assert ledger.begin(call).first
    finally:
        ledger.close()
    admin = RestateAdminApi(live.settings.admin_url)
    try:

        def held() -> set[str]:
            entries = (*calls, keep)
            return {c for c in entries if admin.keys_with_prefix(EFFECTS, ledger_key(c))}

        assert held() == {*calls, keep}

        deleted = live.http.delete("/v1/agents/ledger.a", headers=auth)
        assert deleted.status_code == 200, deleted.text
        assert held() == {"ledger.b/t7/r1/call_9", keep}
        # The command's step returning after the erasure writes its entry no more.
        finishing = RestateLedger(live.settings.ingress_url)
        try:
            finishing.finish(calls[0], Finished(ToolResult("call_9", "run_command", "ok", "x")))
        finally:
            finishing.close()
        assert held() == {"ledger.b/t7/r1/call_9", keep}

        erased = live.http.delete("/v1/tenant", headers=auth)
        assert erased.status_code == 200, erased.text
        assert held() == {keep}
    finally:
        admin.close()
