"""End users' memory on a real stack (restate-server, the endpoint, the gateway, a page's
publishable key and end-user tokens): what a model remembers in a conversation of user U
is U's, shown to U's later conversations with the tenant's other kinds (through the tool,
the prompt's memory layer and the API) and to nobody else's; a tenant-wide write from an
end user's conversation is refused unless the spec allows it; erasing U's memories leaves
their text in no search, prompt, answer or row of Restate's state, and is recorded."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest

from services.contracts import ERASURES, Empty
from services.endusers import conversation_address
from services.executor.scripted import script
from tests.durable.conftest import eventually
from tests.fixtures.models import extract_started_path
from tests.gateway.test_erasure import _restate_rows
from tests.gateway.test_publishable_stack import ORIGIN, SECRET, token
from tests.gateway.test_stack import GatewayStack, gateway_stack, made_key

pytestmark = pytest.mark.durable

TOOLS = ["remember", "search_memory"]
KINDS: dict[str, dict[str, Any]] = {
    "talker": {},
    "helper": {},
    "sharer": {"memory": {"tenant_writes": True}},
    "noter": {"memory": {"extract": True}},
    "slownoter": {"memory": {"extract": True}, "model": "slow_extract"},
}


@dataclass
class Site:
    gw: GatewayStack
    page_key: str
    other: dict[str, str]
    """An admin key of another tenant, `globex`, with `helper` published."""

    def headers(self, user: str) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self.page_key}",
            "Origin": ORIGIN,
            "Teaspill-User": token(user, self.page_key.split("_")[1]),
        }

    def say(self, user: str, kind: str, text: str) -> list[dict[str, Any]]:
        """`text` sent to `user`'s conversation with `kind`; its events once it ended."""
        address = conversation_address("acme", kind, user)
        return self.turn(self.headers(user), address, text)

    def turn(
        self, auth: dict[str, str], address: str, text: str, kind: str | None = None
    ) -> list[dict[str, Any]]:
        before = len(self._ends(auth, address))
        body = {"text": text, **({"kind": kind} if kind else {})}
        sent = self.gw.http.post(f"/v1/agents/{address}/messages", json=body, headers=auth)
        assert sent.status_code == 202, sent.text

        def ended() -> list[dict[str, Any]] | None:
            events = self._timeline(auth, address)
            ends = [e for e in events if e["body"]["type"] == "turn_ended"]
            return events[_after(events, before) :] if len(ends) > before else None

        return eventually(ended, 120, f"a turn of {address} to end")

    def _timeline(self, auth: dict[str, str], address: str) -> list[dict[str, Any]]:
        page = self.gw.http.get(f"/v1/agents/{address}/timeline?limit=500", headers=auth)
        if page.status_code == 404:
            return []
        assert page.status_code == 200, page.text
        events: list[dict[str, Any]] = page.json()["events"]
        return events

    def _ends(self, auth: dict[str, str], address: str) -> list[dict[str, Any]]:
        return [e for e in self._timeline(auth, address) if e["body"]["type"] == "turn_ended"]

    def memories(self, auth: dict[str, str], **params: str) -> list[dict[str, Any]]:
        answer = self.gw.http.get("/v1/memory", params=params, headers=auth)
        assert answer.status_code == 200, answer.text
        found: list[dict[str, Any]] = answer.json()["memories"]
        return found


def _after(events: list[dict[str, Any]], turns: int) -> int:
    """The index of the first event after the `turns`-th turn's end."""
    ends = [i for i, e in enumerate(events) if e["body"]["type"] == "turn_ended"]
    return ends[turns - 1] + 1 if turns else 0


def _spec(kind: str) -> dict[str, Any]:
    return {
        "kind": kind,
        "instructions": "Follow the script.",
        "model": "script",
        "tools": TOOLS,
        **KINDS[kind],
    }


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    home = tmp_path_factory.mktemp("user-memory-home")
    models = ("tests.fixtures.models",)
    with gateway_stack(home, key_cache_seconds=0.5, model_modules=models) as gw:
        put = gw.http.put(
            "/v1/end-users", json={"algorithm": "HS256", "key": SECRET}, headers=gw.auth
        )
        assert put.status_code == 200, put.text
        for kind in KINDS:
            published = gw.http.post("/v1/specs", json=_spec(kind), headers=gw.auth)
            assert published.status_code == 201, published.text
        made = gw.http.post(
            "/v1/keys",
            json={"scope": "publishable", "name": "web", "origins": [ORIGIN], "kinds": [*KINDS]},
            headers=gw.auth,
        )
        assert made.status_code == 201, made.text
        other = {"Authorization": f"Bearer {made_key(gw.settings, gw.http, 'globex', 'admin')}"}
        published = gw.http.post("/v1/specs", json=_spec("helper"), headers=other)
        assert published.status_code == 201, published.text
        found = Site(gw, made.json()["key"], other)
        eventually(
            lambda: gw.http.get("/v1/me", headers=found.headers("U")).status_code == 200 or None,
            60,
            "the publishable key to work",
        )
        yield found


def remembering(text: str, **arguments: str) -> str:
    call = {"name": "remember", "arguments": {"text": text, **arguments}}
    return script({"calls": [call]}, {"reply": "kept"})


def looking(query: str) -> str:
    call = {"name": "search_memory", "arguments": {"query": query}}
    return script({"calls": [call]}, {"reply": "looked"})


def results(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["body"] for e in events if e["body"]["type"] == "tool_finished"]


def shown(events: list[dict[str, Any]]) -> list[list[str]]:
    """The ids of the memories each model call's prompt showed."""
    return [e["body"]["memories"] for e in events if e["body"]["type"] == "model_message"]


MARKER = "oolong-vermilion-3318"


def test_what_a_user_told_one_kind_is_theirs_in_every_kind_and_nobody_elses(
    site: Site,
) -> None:
    kept = results(site.say("U", "talker", remembering(f"U drinks {MARKER} tea")))
    assert [r["status"] for r in kept] == ["ok"], kept
    made = msgspec.json.decode(kept[0]["content"])
    assert made["scope"] == "user"
    owned = site.memories(site.gw.auth, scope="user", user="U")
    assert [m["id"] for m in owned] == [made["remembered"]]
    assert owned[0]["scope"] == {"tenant": "acme", "kind": "user", "owner": "U"}
    # Nothing went to the tenant's scope or the conversation's own.
    assert site.memories(site.gw.auth, q=MARKER) == []
    talker = conversation_address("acme", "talker", "U")
    assert site.memories(site.gw.auth, scope="agent", agent=talker, q=MARKER) == []

    # U's conversation with another kind: the tool and the prompt find it.
    later = site.say("U", "helper", looking(f"{MARKER} tea"))
    assert MARKER in results(later)[-1]["content"]
    assert shown(later)[0] == [made["remembered"]]

    # V's conversation with the same kind, and another tenant's agent: nothing.
    theirs = site.say("V", "helper", looking(f"{MARKER} tea"))
    assert results(theirs)[-1]["content"] == '{"memories":[]}'
    assert shown(theirs) == [[], []]
    foreign = site.turn(site.other, "globex.helper", looking(f"{MARKER} tea"), "helper")
    assert results(foreign)[-1]["content"] == '{"memories":[]}'
    assert shown(foreign) == [[], []]

    # Another tenant's key: U's memories are not there, and not there to delete.
    assert site.memories(site.other, scope="user", user="U", q=MARKER) == []
    assert site.memories(site.other, scope="user", user="U") == []
    path = f"/v1/memory/{made['remembered']}"
    theirs_deleted = site.gw.http.delete(
        path, params={"scope": "user", "user": "U"}, headers=site.other
    )
    nothing = site.gw.http.delete(
        "/v1/memory/mem" + "0" * 20, params={"scope": "user", "user": "U"}, headers=site.other
    )
    assert (theirs_deleted.status_code, nothing.status_code) == (404, 404)
    said = theirs_deleted.json()["error"]["message"].replace(made["remembered"], "X")
    assert said == nothing.json()["error"]["message"].replace("mem" + "0" * 20, "X")
    assert site.memories(site.gw.auth, scope="user", user="U", q=MARKER) != []


SHARED = "saffron-gannet-7092"


def test_a_tenant_wide_write_from_a_users_conversation_needs_the_spec(site: Site) -> None:
    refused = results(site.say("W", "talker", remembering(f"all users: {SHARED}", scope="tenant")))
    assert [r["status"] for r in refused] == ["error"]
    assert "memory.tenant_writes" in refused[0]["content"]
    assert site.memories(site.gw.auth, q=SHARED) == []
    assert site.memories(site.gw.auth, scope="user", user="W", q=SHARED) == []

    allowed = results(site.say("W", "sharer", remembering(f"all users: {SHARED}", scope="tenant")))
    assert msgspec.json.decode(allowed[0]["content"])["scope"] == "tenant"
    assert [m["record"]["text"] for m in site.memories(site.gw.auth, q=SHARED)] == [
        f"all users: {SHARED}"
    ]
    # The conversation's own scope stays reachable, when asked for.
    own = results(site.say("W", "talker", remembering("W's own note", scope="agent")))
    assert msgspec.json.decode(own[0]["content"])["scope"] == "agent"


GONE = "pangolin-indigo-4471"


def test_erasing_a_users_memories_leaves_their_text_nowhere_and_is_recorded(site: Site) -> None:
    auth = site.gw.auth
    made = site.gw.http.post(
        "/v1/memory",
        json={"text": f"X keeps a {GONE} in the garden", "scope": "user", "user": "X"},
        headers=auth,
    )
    assert made.status_code == 201, made.text
    record = made.json()["id"]
    # The conversations never carry the marker: only the memory does.
    kept = site.say("X", "helper", "Where is the garden?")
    assert shown(kept) == [[record]]
    assert _restate_rows(site.gw.settings, GONE)["state"] == 1

    gone = site.gw.http.delete("/v1/memory", params={"scope": "user", "user": "X"}, headers=auth)
    assert gone.status_code == 204, gone.text

    assert site.memories(auth, scope="user", user="X", q=GONE) == []
    assert site.memories(auth, scope="user", user="X") == []
    after = site.say("X", "helper", looking("garden"))
    assert results(after)[-1]["content"] == '{"memories":[]}'
    assert shown(after) == [[], []]
    asked = site.say("X", "talker", "Where is the garden?")
    assert shown(asked) == [[]]
    assert _restate_rows(site.gw.settings, GONE)["state"] == 0

    # Recorded with the tenant's erasures: who, when, which scope, never the text.
    erased = site.gw.ingress.call(ERASURES, Empty(), "acme").records
    forgotten = [r for r in erased if r.what == "memory"]
    assert [(r.target, r.memory_id) for r in forgotten][-1] == ("acme:user:X", "")
    assert site.gw.key.split("_")[1] in forgotten[-1].by
    assert GONE not in repr(erased)


def test_forgetting_one_record_is_recorded_and_a_miss_is_not(site: Site) -> None:
    auth = site.gw.auth
    made = site.gw.http.post(
        "/v1/memory", json={"text": "Y likes maps", "scope": "user", "user": "Y"}, headers=auth
    )
    record = made.json()["id"]
    path = f"/v1/memory/{record}"
    foreign = site.gw.http.delete(path, params={"scope": "user", "user": "Y"}, headers=site.other)
    assert foreign.status_code == 404
    assert site.gw.ingress.call(ERASURES, Empty(), "globex").records == ()
    gone = site.gw.http.delete(path, params={"scope": "user", "user": "Y"}, headers=auth)
    assert gone.status_code == 204, gone.text
    again = site.gw.http.delete(path, params={"scope": "user", "user": "Y"}, headers=auth)
    assert again.status_code == 404
    erased = site.gw.ingress.call(ERASURES, Empty(), "acme").records
    assert [(r.what, r.target, r.memory_id) for r in erased if r.memory_id] == [
        ("memory", "acme:user:Y", record)
    ]
    assert "maps" not in repr(erased)


def extracted(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["body"] for e in events if e["body"]["type"] == "memories_extracted"]


def test_a_turn_of_a_spec_that_extracts_keeps_its_facts_in_the_users_scope(site: Site) -> None:
    facts = "- E's cat is called Miso-4120\n- E lives in Lyon\n- E's cat is called Miso-4120"
    events = site.say("E", "noter", script({"reply": "Noted."}, {"reply": facts}))

    assert [e["body"]["reply"] for e in events if e["body"]["type"] == "turn_ended"] == ["Noted."]
    [kept] = extracted(events)
    assert (kept["scope"], len(kept["ids"])) == ("user", 2)
    listed = site.memories(site.gw.auth, scope="user", user="E")
    assert sorted(m["text"] for m in listed) == ["E lives in Lyon", "E's cat is called Miso-4120"]
    assert sorted(m["id"] for m in listed) == sorted(kept["ids"])
    # The facts are in the memory alone: the timeline has their ids.
    assert "Lyon" not in repr([e for e in events if e["body"]["type"] != "turn_started"])
    later = site.say("E", "helper", "Where does my cat Miso-4120 sleep?")
    assert shown(later)[0] != []
    # A turn the model says nothing worth keeping of keeps nothing.
    quiet = site.say("E", "noter", script({"reply": "Hello."}, {"reply": "NONE"}))
    assert [(b["scope"], b["ids"]) for b in extracted(quiet)] == [("user", [])]
    assert len(site.memories(site.gw.auth, scope="user", user="E")) == 2
    # A tenant-wide key's turn keeps them in the agent's own scope.
    mine = site.turn(
        site.gw.auth, "acme.noter", script({"reply": "Ok."}, {"reply": "Ann likes figs"}), "noter"
    )
    assert extracted(mine)[0]["scope"] == "agent"
    own = site.memories(site.gw.auth, scope="agent", agent="acme.noter")
    assert [m["text"] for m in own] == ["Ann likes figs"]


def test_sigkill_mid_extraction_keeps_one_set_of_facts(site: Site) -> None:
    address = conversation_address("acme", "slownoter", "K")
    key = f"{address}/t1/extract"
    text = script({"reply": "Noted."}, {"reply": "K plays the oboe\nK's sister is Ines"})
    sent = site.gw.http.post(
        f"/v1/agents/{address}/messages", json={"text": text}, headers=site.headers("K")
    )
    assert sent.status_code == 202, sent.text
    path = extract_started_path(site.gw.settings.home)
    eventually(
        lambda: key in (path.read_text() if path.exists() else "") or None,
        60,
        "the extraction step to start",
    )
    site.gw.endpoint.kill()
    site.gw.endpoint.start()

    def ended() -> list[dict[str, Any]] | None:
        events = site._timeline(site.headers("K"), address)
        return events if any(e["body"]["type"] == "turn_ended" for e in events) else None

    events = eventually(ended, 120, "the turn to end")
    assert path.read_text().splitlines().count(key) == 2, "the step ran again after the kill"
    listed = site.memories(site.gw.auth, scope="user", user="K")
    assert sorted(m["text"] for m in listed) == ["K plays the oboe", "K's sister is Ines"]
    [kept] = extracted(events)
    assert sorted(kept["ids"]) == sorted(m["id"] for m in listed)
    assert [e["body"]["outcome"] for e in events if e["body"]["type"] == "turn_ended"] == [
        "succeeded"
    ]


def test_a_user_id_of_any_characters_a_token_names_has_its_memory(site: Site) -> None:
    user = "team/Ann Smith|7?#"
    kept = results(site.say(user, "talker", remembering("Ann likes quince-6650")))
    assert [r["status"] for r in kept] == ["ok"], kept
    mine = {"scope": "user", "user": user}
    assert [m["record"]["text"] for m in site.memories(site.gw.auth, q="quince", **mine)] == [
        "Ann likes quince-6650"
    ]
    gone = site.gw.http.delete("/v1/memory", params=mine, headers=site.gw.auth)
    assert gone.status_code == 204, gone.text
    assert site.memories(site.gw.auth, **mine) == []
    bad = site.gw.http.get(
        "/v1/memory", params={"scope": "user", "user": "a\nb"}, headers=site.gw.auth
    )
    assert bad.status_code == 422
