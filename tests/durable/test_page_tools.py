"""Tools that run in the page, on a real stack (restate-server, the endpoint, the gateway):
the page that follows the conversation claims the call, runs it once and posts its
result, and the turn goes on with it; with no page open the turn waits (and parks), and
a page that opens the conversation later finds the request on the timeline and runs it;
a page that closes after its claim leaves the outcome unknown and the call is never run
again; a result past its cap is dropped and the model told so; a second claim or a
second result is 409. A page is its id and the key that presents it: another key naming
the same id can neither post its result nor end its call by closing a stream, a read key
cannot follow as a page, and a result before any claim is refused without spending
anything."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx
import msgspec
import pytest

from schemas.events import ApprovalRequested, Event, ToolFinished, TurnEnded
from schemas.pages import UNKNOWN_PAGE_OUTCOME
from services.executor.scripted import script
from tests.gateway.test_stack import GatewayStack, Sse, gateway_stack, made_key

pytestmark = pytest.mark.durable

TITLE = {
    "name": "read_title",
    "description": "The page's title.",
    "parameters": {"type": "object", "properties": {"upper": {"type": "boolean"}}},
}
SPEC = {
    "kind": "pager",
    "instructions": "Follow the script.",
    "model": "script",
    "tools": {"page:read_title": "allow"},
}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with gateway_stack(tmp_path_factory.mktemp("pages-home")) as stack:
        quick = {**SPEC, "kind": "quick-pager", "limits": {"approval_timeout": 1}}
        for each in (SPEC, quick):
            published = stack.http.post("/v1/specs", json=each, headers=stack.auth)
            assert published.status_code == 201, published.text
        yield stack


@pytest.fixture(scope="module")
def other_writer(gw: GatewayStack) -> dict[str, str]:
    """Another write key of the same tenant."""
    return {"Authorization": f"Bearer {made_key(gw.settings, gw.http, 'acme', 'write')}"}


class Page:
    """An HTTP client standing in for a page: it follows the conversation with its own
    id, claims what the agent asks of it, runs it (counted) and posts the result, with
    the stack's admin key or `auth`."""

    def __init__(
        self, gw: GatewayStack, address: str, page: str, auth: dict[str, str] | None = None
    ) -> None:
        self.gw, self.address, self.page = gw, address, page
        self.auth = auth or gw.auth
        self.runs = 0

    @contextmanager
    def open(self) -> Iterator[Sse]:
        url = f"/v1/agents/{self.address}/events?page={self.page}"
        with self.gw.http.stream("GET", url, headers=self.auth, timeout=120) as stream:
            assert stream.status_code == 200
            yield Sse(stream)

    def claim(self, request_id: str) -> httpx.Response:
        return self.gw.http.post(
            f"/v1/agents/{self.address}/page-calls/{request_id}/claim",
            json={"page": self.page},
            headers=self.auth,
        )

    def post(self, request_id: str, content: str, kind: str = "other") -> httpx.Response:
        return self.gw.http.post(
            f"/v1/agents/{self.address}/page-calls/{request_id}/result",
            json={"page": self.page, "content": content, "kind": kind},
            headers=self.auth,
        )

    def run(self, request_id: str, arguments: dict[str, object]) -> str:
        self.runs += 1
        return "MY PAGE" if arguments.get("upper") else "My page"


def send(gw: GatewayStack, address: str, kind: str = "pager") -> None:
    text = script(
        {"calls": [{"name": "read_title", "arguments": {"upper": True}}]},
        {"reply": "Title: {results}"},
    )
    body = {"text": text, "kind": kind, "page_tools": [TITLE]}
    sent = gw.http.post(f"/v1/agents/{address}/messages", json=body, headers=gw.auth)
    assert sent.status_code == 202, sent.text


def requested(sse: Sse) -> ApprovalRequested:
    def asked(frames: list[object]) -> bool:
        return any(getattr(f, "event", "") == "approval_requested" for f in frames)

    frame = next(f for f in sse.until(asked) if f.event == "approval_requested")
    body = msgspec.json.decode(frame.data, type=Event).body
    assert isinstance(body, ApprovalRequested)
    assert body.page
    return body


def ended(gw: GatewayStack, address: str) -> TurnEnded:
    (event,) = gw.wait_for(address, "turn_ended")[-1:]
    assert isinstance(event.body, TurnEnded)
    return event.body


def finished(gw: GatewayStack, address: str) -> list[ToolFinished]:
    return [e.body for e in gw.timeline(address) if isinstance(e.body, ToolFinished)]


def test_an_open_page_runs_the_call_once_and_the_turn_goes_on_with_its_result(
    gw: GatewayStack,
) -> None:
    address = "acme.page-open"
    page, other = Page(gw, address, "tab-1"), Page(gw, address, "tab-2")
    send(gw, address)
    with page.open() as sse:
        asked = requested(sse)
        assert (asked.name, asked.arguments) == ("read_title", {"upper": True})
        claimed = page.claim(asked.request_id)
        assert claimed.status_code == 200, claimed.text
        assert claimed.json()["name"] == "read_title"
        second = other.claim(asked.request_id)
        assert second.status_code == 409, second.text
        assert "claimed by another page" in second.json()["error"]["message"]
        posted = page.post(
            asked.request_id, page.run(asked.request_id, claimed.json()["arguments"])
        )
        assert posted.status_code == 202, posted.text
        again = page.post(asked.request_id, "My page")
        assert again.status_code == 409, again.text
        assert "has its result already" in again.json()["error"]["message"]
        done = ended(gw, address)
    assert (done.outcome, done.reply) == ("succeeded", "Title: MY PAGE")
    assert page.runs == 1
    assert [(f.name, f.status, f.content) for f in finished(gw, address)] == [
        ("read_title", "ok", "MY PAGE")
    ]


def test_with_no_page_open_the_turn_parks_and_a_page_opened_later_runs_the_call_once(
    gw: GatewayStack,
) -> None:
    address = "acme.page-later"
    send(gw, address, kind="quick-pager")
    gw.wait_for(address, "turn_parked")
    row = gw.http.get(f"/v1/agents/{address}", headers=gw.auth).json()
    assert row["status"] == "parked", row
    page = Page(gw, address, "opened-later")
    with page.open() as sse:  # from the start: the pending request is on the timeline
        asked = requested(sse)
        claimed = page.claim(asked.request_id)
        assert claimed.status_code == 200, claimed.text
        result = page.run(asked.request_id, claimed.json()["arguments"])
        assert page.post(asked.request_id, result).status_code == 202
        done = ended(gw, address)
    assert (done.outcome, done.reply) == ("succeeded", "Title: MY PAGE")
    assert page.runs == 1
    assert [f.status for f in finished(gw, address)] == ["ok"]


def test_a_page_closed_mid_request_leaves_the_outcome_unknown_and_nothing_runs_again(
    gw: GatewayStack,
) -> None:
    address = "acme.page-closed"
    page = Page(gw, address, "closing")
    send(gw, address)
    with page.open() as sse:
        asked = requested(sse)
        assert page.claim(asked.request_id).status_code == 200
        page.runs += 1  # it starts running the call, and closes before its result
    done = ended(gw, address)
    assert done.outcome == "succeeded"
    assert done.reply == f"Title: {UNKNOWN_PAGE_OUTCOME}"
    assert [(f.status, f.content) for f in finished(gw, address)] == [
        ("unknown", UNKNOWN_PAGE_OUTCOME)
    ]
    late = Page(gw, address, "another")
    refused = late.claim(asked.request_id)
    assert refused.status_code == 409, refused.text
    assert page.post(asked.request_id, "My page").status_code == 409
    assert (page.runs, late.runs) == (1, 0)


def test_a_result_past_its_cap_is_dropped_and_the_model_told_so(gw: GatewayStack) -> None:
    address = "acme.page-big"
    page = Page(gw, address, "big")
    send(gw, address)
    with page.open() as sse:
        asked = requested(sse)
        assert page.claim(asked.request_id).status_code == 200
        posted = page.post(asked.request_id, "x" * 16_001, kind="response")
        assert posted.status_code == 202, posted.text
        assert posted.json()["dropped"] is True
        done = ended(gw, address)
    (result,) = finished(gw, address)
    assert result.status == "error"
    assert result.content.startswith("The page's result was 16,001 characters, more than")
    assert "16,000 a response body may take, so it was dropped" in result.content
    assert done.reply == f"Title: {result.content}"


def test_a_page_tool_the_spec_does_not_grant_is_never_called(gw: GatewayStack) -> None:
    address = "acme.page-ungranted"
    other = {**TITLE, "name": "delete_everything"}
    text = script(
        {"calls": [{"name": "delete_everything", "arguments": {}}]}, {"reply": "{results}"}
    )
    body = {"text": text, "kind": "pager", "page_tools": [TITLE, other]}
    sent = gw.http.post(f"/v1/agents/{address}/messages", json=body, headers=gw.auth)
    assert sent.status_code == 202, sent.text
    done = ended(gw, address)
    assert "no tool named 'delete_everything'" in done.reply
    assert "read_title" in done.reply
    assert not [e for e in gw.timeline(address) if isinstance(e.body, ApprovalRequested)]


def test_of_pages_claiming_at_once_one_runs_the_call(gw: GatewayStack) -> None:
    address = "acme.page-race"
    send(gw, address)
    pages = [Page(gw, address, f"racer-{n}") for n in range(4)]
    with pages[0].open() as sse:
        asked = requested(sse)
        with ThreadPoolExecutor(len(pages)) as pool:
            claims = list(pool.map(lambda p: p.claim(asked.request_id), pages))
        codes = sorted(c.status_code for c in claims)
        assert codes == [200, 409, 409, 409], [c.text for c in claims]
        (winner,) = [p for p, c in zip(pages, claims, strict=True) if c.status_code == 200]
        gw.wait_for(address, "page_call_claimed")
        for loser in (p for p in pages if p is not winner):
            refused = loser.post(asked.request_id, "not mine")
            assert refused.status_code == 409, refused.text
        assert winner.post(asked.request_id, "Mine").status_code == 202
        done = ended(gw, address)
    assert done.reply == "Title: Mine"
    assert [f.content for f in finished(gw, address)] == ["Mine"]


def test_a_read_key_cannot_follow_as_a_page(gw: GatewayStack) -> None:
    address = "acme.page-reader"
    send(gw, address)
    gw.wait_for(address, "approval_requested")
    reader = {"Authorization": f"Bearer {made_key(gw.settings, gw.http, 'acme', 'read')}"}
    url = f"/v1/agents/{address}/events?page=tab-1"
    with gw.http.stream("GET", url, headers=reader) as refused:
        assert refused.status_code == 403
        refused.read()
    assert refused.json()["error"]["message"] == (
        "following as a page (?page=) needs a write key, since the page's stream decides "
        "the outcome of the calls it claims; this key is read"
    )
    with gw.http.stream("GET", f"/v1/agents/{address}/events", headers=reader) as plain:
        assert plain.status_code == 200


def test_another_key_naming_the_same_page_can_neither_answer_nor_end_its_call(
    gw: GatewayStack, other_writer: dict[str, str]
) -> None:
    address = "acme.page-impostor"
    page = Page(gw, address, "tab-1")
    impostor = Page(gw, address, "tab-1", other_writer)
    send(gw, address)
    with page.open() as sse:
        asked = requested(sse)
        assert page.claim(asked.request_id).status_code == 200
        gw.wait_for(address, "page_call_claimed")
        stolen = impostor.claim(asked.request_id)
        assert stolen.status_code == 409, stolen.text
        forged = impostor.post(asked.request_id, "Forged")
        assert forged.status_code == 409, forged.text
        assert "claimed by another page" in forged.json()["error"]["message"]
        with impostor.open() as theirs:  # opened and closed: the call is not theirs to end
            theirs.until(lambda frames: any(f.event == "page_call_claimed" for f in frames))
        posted = page.post(asked.request_id, page.run(asked.request_id, {"upper": True}))
        assert posted.status_code == 202, posted.text
        done = ended(gw, address)
    assert done.reply == "Title: MY PAGE"
    assert [(f.status, f.content) for f in finished(gw, address)] == [("ok", "MY PAGE")]


def test_a_result_before_any_claim_is_refused_and_spends_nothing(gw: GatewayStack) -> None:
    address = "acme.page-early"
    page = Page(gw, address, "eager")
    send(gw, address)
    with page.open() as sse:
        asked = requested(sse)
        early = page.post(asked.request_id, "Too soon")
        assert early.status_code == 409, early.text
        assert early.json()["error"]["message"] == (
            f"page request {asked.request_id} is claimed by no page: claim the call first "
            "(POST .../claim), then run it and post its result"
        )
        assert page.claim(asked.request_id).status_code == 200
        posted = page.post(asked.request_id, "My page")
        assert posted.status_code == 202, posted.text
        done = ended(gw, address)
    assert done.reply == "Title: My page"
