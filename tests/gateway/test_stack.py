"""The gateway on a real stack: restate-server, the endpoint (agents, projector, model) and
the gateway process, each a child process on free ports under a temporary home."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from schemas.events import Event, ModelMessage, ToolFinished, TurnEnded
from schemas.live import LiveBatch, LiveDelta
from schemas.tenant import Scope
from services.executor.scripted import script
from services.ingress import Ingress
from services.keys import new_key
from services.settings import Settings
from services.stack import Endpoint, Gateway, RestateServer, Stack, isolated_settings
from tests.durable.conftest import eventually
from tests.gateway.streaming import Frame

pytestmark = pytest.mark.durable

LIVE_TOKEN = "durable-live-token"  # noqa: S105 - a test value
CREATED = datetime(2026, 12, 1, tzinfo=UTC)
CALCULATE = script(
    {"calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
    {"reply": "It is {results}"},
)
SLOW = script(
    {"calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
    {"sleep": 4.0, "reply": "It is {results}"},
)
SHAPE = ["turn_started", "model_message", "tool_called", "tool_finished", "model_message"]


@dataclass
class GatewayStack:
    settings: Settings
    restate: RestateServer
    endpoint: Endpoint
    gateway: Gateway
    ingress: Ingress
    http: httpx.Client
    key: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def send(self, address: str, text: str) -> dict[str, Any]:
        response = self.http.post(
            f"/v1/agents/{address}/messages",
            json={"text": text, "kind": "calc"},
            headers=self.auth,
        )
        assert response.status_code == 202, response.text
        answer: dict[str, Any] = response.json()
        return answer

    def page(self, address: str, after: int = 0) -> httpx.Response:
        return paced(
            lambda: self.http.get(
                f"/v1/agents/{address}/timeline?after={after}&limit=500", headers=self.auth
            )
        )

    def timeline(self, address: str) -> list[Event]:
        response = self.page(address)
        if response.status_code == 404:
            return []
        assert response.status_code == 200, response.text
        return _events(response)

    def wait_for(self, address: str, tag: str, timeout: float = 120.0) -> list[Event]:
        def seen() -> list[Event] | None:
            try:
                events = self.timeline(address)
            except httpx.TransportError:
                return None  # the gateway is restarting
            return events if any(_tag(e) == tag for e in events) else None

        return eventually(seen, timeout, f"{tag} of {address} through the gateway")

    def live(self, *deltas: LiveDelta) -> None:
        response = self.http.post(
            "/internal/live",
            content=msgspec.json.encode(LiveBatch(deltas)),
            headers={"X-Teaspill-Live-Token": LIVE_TOKEN},
        )
        assert response.status_code == 200, response.text


def paced(request: Callable[[], httpx.Response]) -> httpx.Response:
    """`request`'s answer, asked again after `Retry-After` while the key's request rate
    refuses it, as a client keeps to the rate; any other answer as it came."""
    while True:
        response = request()
        if response.status_code != 429 or "requests a second" not in response.text:
            return response
        time.sleep(float(response.headers.get("retry-after", "1")))


def _events(response: httpx.Response) -> list[Event]:
    return list(msgspec.json.decode(response.content, type=_Page).events)


class _Page(msgspec.Struct):
    events: list[Event]
    last_seq: int


def _tag(event: Event) -> str:
    return str(event.body.__struct_config__.tag)


def stack_settings(home: Path) -> Settings:
    """The gateway reads a followed agent only when the projector tells it to (its fallback
    poll is ten minutes): every event an SSE test here receives came by a notice."""
    return isolated_settings(
        home,
        live_token=LIVE_TOKEN,
        notify_token="durable-notify-token",  # noqa: S106 - a test value
        feed_poll_seconds=600.0,
        tool_modules=("tests.fixtures.tools",),
        model_context=2048,
    )


def admin_key(settings: Settings, http: httpx.Client) -> str:
    return made_key(settings, http, "acme", "admin")


def made_key(settings: Settings, http: httpx.Client, tenant: str, scope: Scope) -> str:
    """Made as `teaspill keys create` would: through the Tenant object, then projected (the
    gateway `http` reaches answers it)."""
    plaintext, key = new_key(tenant, scope, CREATED)
    added = httpx.post(
        f"{settings.ingress_url}/Tenant/{tenant}/add_key",
        content=msgspec.json.encode(key),
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert added.status_code == 200, added.text
    auth = {"Authorization": f"Bearer {plaintext}"}
    eventually(
        lambda: http.get("/v1/agents", headers=auth).status_code == 200 or None,
        60,
        "the key to reach the projection",
    )
    return plaintext


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with gateway_stack(tmp_path_factory.mktemp("gateway-home")) as stack:
        yield stack


@contextlib.contextmanager
def gateway_stack(home: Path, **settings_of: Any) -> Iterator[GatewayStack]:
    """restate-server, the endpoint and the gateway, with an admin key and `calc` published;
    `settings_of` changes the stack's settings."""
    settings = stack_settings(home).model_copy(update=settings_of)
    # The executor's own live pushes are switched off, so that the live text the tests
    # see is exactly what they push (the script model writes a reply all at once).
    stack = Stack(settings, endpoint_env={"TEASPILL_LIVE_TOKEN": ""})
    with (
        stack,
        httpx.Client(base_url=stack.gateway.url, timeout=30) as http,
        contextlib.closing(Ingress(settings.ingress_url)) as ingress,
    ):
        key = admin_key(settings, http)
        published = http.post(
            "/v1/specs",
            json={
                "kind": "calc",
                "instructions": "Use the calculator.",
                "model": "script",
                "tools": ["calculator"],
            },
            headers={"Authorization": f"Bearer {key}"},
        )
        assert published.status_code == 201, published.text
        assert published.json()["spec"]["version"] == 1
        yield GatewayStack(
            settings, stack.restate, stack.endpoint, stack.gateway, ingress, http, key
        )


class Sse:
    """A blocking SSE reader over one open response."""

    def __init__(self, response: httpx.Response) -> None:
        self._lines = response.iter_lines()
        self.frames: list[Frame] = []

    def until(self, done: Any) -> list[Frame]:
        fields: dict[str, str] = {}
        start = len(self.frames)
        for line in self._lines:
            if line:
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
                continue
            if "event" in fields:
                self.frames.append(Frame(fields["event"], fields.get("data", ""), fields.get("id")))
            fields = {}
            if done(self.frames[start:]):
                return self.frames[start:]
        raise AssertionError(f"the stream ended after {self.frames}")


def ended(frames: list[Frame]) -> bool:
    return any(f.event == "turn_ended" for f in frames)


def has(event: str) -> Any:
    return lambda frames: any(f.event == event for f in frames)


def recorded(frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if f.id is not None]


def as_frames(events: list[Event]) -> list[Frame]:
    return [Frame(_tag(e), msgspec.json.encode(e).decode(), str(e.seq)) for e in events]


def test_the_json_page_and_the_sse_stream_carry_identical_events(gw: GatewayStack) -> None:
    sent = gw.send("acme.identical", CALCULATE)
    assert (sent["after_seq"], sent["events_url"]) == (
        0,
        "/v1/agents/acme.identical/events?after=0",
    )
    events = gw.wait_for("acme.identical", "turn_ended")
    assert [_tag(e) for e in events] == [*SHAPE, "turn_ended"]
    final = events[-1].body
    assert isinstance(final, TurnEnded)
    assert (final.outcome, final.reply) == ("succeeded", "It is 42")
    page = gw.page("acme.identical")
    with gw.http.stream("GET", sent["events_url"], headers=gw.auth) as response:
        frames = recorded(Sse(response).until(ended))
    assert frames == as_frames(events)
    for frame in frames:
        assert frame.data.encode() in page.content  # byte for byte
    assert json.loads(page.content)["last_seq"] == len(events)
    agent = gw.http.get("/v1/agents/acme.identical", headers=gw.auth).json()
    assert (agent["kind"], agent["spec_version"], agent["status"]) == ("calc", 1, "idle")


def test_a_follower_that_reconnects_mid_turn_gets_every_event_once_and_the_live_tail(
    gw: GatewayStack,
) -> None:
    address = "acme.reconnect"
    gw.send(address, SLOW)
    with gw.http.stream("GET", f"/v1/agents/{address}/events", headers=gw.auth) as response:
        first = Sse(response)
        before = first.until(has("tool_finished"))
        finished = [f for f in before if f.event == "tool_finished"][-1]
        round_ = msgspec.json.decode(finished.data, type=Event).round + 1
        gw.live(LiveDelta(address, 1, round_, "a1", 0, "It "))
        before += first.until(has("delta"))
    gw.live(LiveDelta(address, 1, round_, "a1", 0, "It is"))  # a repeat, and more
    last = recorded(before)[-1].id
    assert last is not None
    headers = {**gw.auth, "Last-Event-ID": last}
    with gw.http.stream("GET", f"/v1/agents/{address}/events", headers=headers) as response:
        second = Sse(response)
        after = second.until(has("delta"))
        gw.live(LiveDelta(address, 1, round_, "a1", 5, " 42"))
        after += second.until(ended)
    events = gw.timeline(address)
    assert recorded(before) + recorded(after) == as_frames(events)
    tail = [(f.event, f.data) for f in after]
    deltas = [json.loads(data) for name, data in tail if name == "delta"]
    assert [(d["offset"], d["text"]) for d in deltas] == [(0, "It is"), (5, " 42")]
    names = [name for name, _ in tail]
    assert names.index("model_message") > max(i for i, n in enumerate(names) if n == "delta")


def test_killing_the_gateway_mid_turn_loses_nothing(gw: GatewayStack) -> None:
    address = "acme.gateway-killed"
    gw.send(address, SLOW)
    gw.wait_for(address, "tool_finished")
    gw.gateway.kill()
    gw.gateway.start()
    events = gw.wait_for(address, "turn_ended")
    assert [_tag(e) for e in events] == [*SHAPE, "turn_ended"]
    assert events == list(gw.ingress.timeline(address, limit=500).events)


def test_killing_the_endpoint_mid_turn_the_projection_catches_up(gw: GatewayStack) -> None:
    address = "acme.projector-killed"
    gw.send(address, SLOW)
    gw.wait_for(address, "tool_finished")
    with gw.http.stream("GET", f"/v1/agents/{address}/events", headers=gw.auth) as response:
        follower = Sse(response)
        follower.until(has("tool_finished"))
        gw.endpoint.kill()
        gw.endpoint.start()
        follower.until(ended)
    events = gw.wait_for(address, "turn_ended")
    assert [_tag(e) for e in events] == [*SHAPE, "turn_ended"]
    assert events == list(gw.ingress.timeline(address, limit=500).events)
    assert recorded(follower.frames) == as_frames(events)
    message = events[-2].body
    assert isinstance(message, ModelMessage)
    assert message.text == "It is 42"
    assert isinstance(events[3].body, ToolFinished)


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (
            {"model": "nosuchmodel"},
            "The published spec: field 'model': this deployment has no model 'nosuchmodel'. "
            "It offers: script, smollm2.",
        ),
        ({"tools": ["nosuchtool"]}, "field 'tools': this deployment has no tool 'nosuchtool'."),
        ({"limits": {"max_rounds": 0}}, "field 'limits.max_rounds' is 0; it must be a whole"),
    ],
)
def test_a_spec_the_deployment_cannot_run_is_refused_when_published(
    gw: GatewayStack, spec: dict[str, Any], says: str
) -> None:
    body = {"kind": "unrunnable", "instructions": "x", "model": "script", **spec}
    response = gw.http.post("/v1/specs", json=body, headers=gw.auth)
    assert response.status_code == 422, response.text
    assert says in response.json()["error"]["message"]
    listed = gw.http.get("/v1/specs?kind=unrunnable", headers=gw.auth)
    assert listed.json() == {"versions": []}
