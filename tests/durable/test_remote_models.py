"""OpenAI-compatible model servers through the whole stack: a real `llama_cpp.server` on the
bundled SmolLM2, fallback when it is SIGKILLed mid-reply, trust, stop, and the API key
kept out of every record."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from schemas.events import Event, ModelFallback, ModelMessage, TurnEnded
from schemas.spec import AgentSpec, Limits
from schemas.wake import Message
from services.ingress import Ingress, IngressError
from services.settings import Settings
from services.stack import Stack, isolated_settings
from services.stack.process import free_port
from tests.durable.conftest import eventually
from tests.durable.model_server import MODEL_ID, CountingServer, LlamaServer
from tests.durable.test_model import cpu_over
from tests.gateway.test_stack import Sse, admin_key

pytestmark = [pytest.mark.durable, pytest.mark.model]

API_KEY = "sk-teaspill-test-5b1f0c9e7d"  # a test value, looked for everywhere
LIVE_TOKEN = "remote-live-token"  # noqa: S105 - a test value
STORY = "Write a very long story about a dragon and a lighthouse, in many chapters."


@dataclass
class RemoteStack:
    stack: Stack
    server: LlamaServer
    doomed: LlamaServer
    external: CountingServer
    ingress: Ingress
    http: httpx.Client
    key: str

    @property
    def settings(self) -> Settings:
        return self.stack.settings

    def send(self, address: str, text: str, spec: AgentSpec) -> None:
        self.ingress.send_wake(address, Message(text, spec=spec))

    def follow(self, address: str) -> Iterator[Sse]:
        """One SSE follower of the agent, once the catalog knows it."""
        auth = {"Authorization": f"Bearer {self.key}"}
        url = f"/v1/agents/{address}/events"
        deadline = time.monotonic() + 60
        while True:
            with self.http.stream("GET", url, headers=auth, timeout=120) as response:
                if response.status_code == 200:
                    yield Sse(response)
                    return
                assert response.status_code == 404, response.read()
            assert time.monotonic() < deadline, f"{address} never reached the catalog"
            time.sleep(0.1)

    def events(self, address: str) -> list[Event]:
        return list(self.ingress.timeline(address, after_seq=0, limit=500).events)

    def ended(self, address: str, timeout: float = 180.0) -> TurnEnded:
        def probe() -> TurnEnded | None:
            ends = [e.body for e in self.events(address) if isinstance(e.body, TurnEnded)]
            return ends[0] if ends else None

        return eventually(probe, timeout, f"the turn of {address} to end")


def models_file(path: Path, server: LlamaServer, doomed: LlamaServer, external: str) -> Path:
    path.write_text(
        f"""
[models.remote]
base_url = "{server.base_url}"
model = "{MODEL_ID}"
api_key_env = "TEST_REMOTE_API_KEY"
trust = "local"
stream_tools = false

[models.doomed]
base_url = "{doomed.base_url}"
model = "{MODEL_ID}"
api_key_env = "TEST_REMOTE_API_KEY"
trust = "local"

[models.dead]
base_url = "http://127.0.0.1:{free_port()}/v1"
model = "nothing"
trust = "local"
timeout = 5

[models.external]
base_url = "{external}"
model = "big"

[models.echoing]
base_url = "{external}"
model = "big"
api_key_env = "TEST_REMOTE_API_KEY"
trust = "local"
"""
    )
    return path


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemoteStack]:
    home = tmp_path_factory.mktemp("remote-home")
    server = LlamaServer(home / "logs", API_KEY)
    doomed = LlamaServer(home / "logs", API_KEY, name="doomed-server")
    with CountingServer() as external:
        path = models_file(home / "models.toml", server, doomed, external.base_url)
        settings = isolated_settings(
            home, live_token=LIVE_TOKEN, models_file=path, model_context=2048
        )
        server.start()
        try:
            with Stack(settings, env={"TEST_REMOTE_API_KEY": API_KEY}) as stack:
                _keep_journals(settings)
                with httpx.Client(base_url=stack.gateway.url, timeout=30) as http:
                    ingress = Ingress(settings.ingress_url)
                    key = admin_key(settings, http)
                    yield RemoteStack(stack, server, doomed, external, ingress, http, key)
                    ingress.close()
        finally:
            server.process.kill()
            doomed.process.kill()


def _keep_journals(settings: Settings) -> None:
    """Finished invocations keep their journal for an hour, so the test can read them."""
    for service in ("Model", "Agent"):
        response = httpx.patch(
            f"{settings.admin_url}/services/{service}", json={"journal_retention": "1h"}
        )
        assert response.is_success, response.text


def spec(kind: str, model: str, **fields: Any) -> AgentSpec:
    limits = fields.pop("limits", Limits(max_tokens=48, max_rounds=3))
    return AgentSpec(kind=kind, instructions="Be brief.", model=model, limits=limits, **fields)


def bodies(events: list[Event], kind: type[Any]) -> list[Any]:
    return [e.body for e in events if isinstance(e.body, kind)]


def test_a_turn_on_the_server_streams_live_text_before_the_recorded_message(
    remote: RemoteStack,
) -> None:
    address = "acme.remote-hello"
    remote.send(address, "Say hello to me.", spec("remote", "remote"))
    for sse in remote.follow(address):
        frames = sse.until(lambda fs: any(f.event == "turn_ended" for f in fs))
    names = [f.event for f in frames]
    deltas = [json.loads(f.data)["text"] for f in frames if f.event == "delta"]
    assert deltas, f"no live text reached the follower: {names}"
    assert names.index("delta") < names.index("model_message")
    message = bodies(remote.events(address), ModelMessage)[0]
    assert message.model == "remote"
    assert message.text
    assert "".join(deltas).strip() == message.text
    # llama-cpp-python's server sends no usage when it streams: the chunks are counted,
    # and a live push carries one chunk or more.
    assert message.usage.completion_tokens >= len(deltas)
    assert message.timing.first_token_seconds > 0
    assert remote.ended(address).outcome == "succeeded"


def test_a_tool_call_in_the_servers_format_runs_the_tool(remote: RemoteStack) -> None:
    address = "acme.remote-tool"
    calc = spec("remote-calc", "remote", tools=("calculator",))
    remote.send(address, "Use the calculator tool to compute 6*7.", calc)
    remote.ended(address)
    events = remote.events(address)
    first = bodies(events, ModelMessage)[0]
    assert first.model == "remote"
    assert [call.name for call in first.tool_calls] == ["calculator"]
    assert isinstance(first.tool_calls[0].arguments, dict)
    tags = [e.body.__struct_config__.tag for e in events]
    assert "tool_finished" in tags


def test_a_server_killed_mid_reply_falls_back_to_the_in_process_model(
    remote: RemoteStack,
) -> None:
    remote.doomed.start()
    address = "acme.remote-fallback"
    chained = spec("remote-chain", "doomed", fallback=("smollm2",), limits=Limits(max_tokens=200))
    remote.send(address, STORY, chained)
    for sse in remote.follow(address):
        before = sse.until(lambda fs: any(f.event == "delta" for f in fs))
        remote.doomed.process.kill()
        after = sse.until(lambda fs: any(f.event == "turn_ended" for f in fs))
    names = [f.event for f in after]
    assert "retract" in names, names
    retract = names.index("retract")
    assert "delta" in names[retract:], "the fallback's text streams after the retraction"
    assert names.index("model_fallback") < names.index("model_message")
    events = [e for e in remote.events(address) if e.round == 1]
    (fallback,) = bodies(events, ModelFallback)
    (message,) = bodies(events, ModelMessage)
    assert (fallback.model, fallback.next) == ("doomed", "smollm2")
    assert "doomed" in fallback.reason
    assert message.model == "smollm2"
    assert before[0].event in {"turn_started", "delta"}
    assert remote.ended(address).outcome == "succeeded"


def test_a_local_only_spec_never_falls_back_to_an_external_model(remote: RemoteStack) -> None:
    before = remote.external.requests
    local = spec("local-only", "dead", fallback=("external",), local_only=True)
    remote.send("acme.local-only", "Hello?", local)
    ended = remote.ended("acme.local-only", timeout=60)
    assert ended.outcome == "failed"
    assert "could not be reached" in ended.reason
    assert "Its fallback 'external' is external, and this agent runs only on local models" in (
        ended.reason
    )
    assert remote.external.requests == before

    first = spec("external-first", "external", local_only=True)
    remote.send("acme.external-first", "Hello?", first)
    refused = remote.ended("acme.external-first", timeout=60)
    assert "The model 'external' is external" in refused.reason
    assert remote.external.requests == before

    # The same chain without local_only does reach the external server: the count above
    # would have moved.
    remote.send("acme.may-go-out", "Hello?", spec("may-go-out", "dead", fallback=("external",)))
    went = remote.ended("acme.may-go-out", timeout=60)
    assert went.outcome == "failed"
    assert "answered 500" in went.reason
    assert remote.external.requests == before + 1


def test_stop_during_a_remote_generation_closes_the_stream(remote: RemoteStack) -> None:
    address = "acme.remote-stop"
    long = spec("remote-long", "remote", limits=Limits(max_tokens=1500, max_rounds=1))
    remote.send(address, STORY, long)
    pgid = remote.server.process.pid
    assert pgid is not None
    for sse in remote.follow(address):
        sse.until(lambda fs: any(f.event == "delta" for f in fs))
        started = time.monotonic()
        assert remote.ingress.stop(address).stopping
        ended = remote.ended(address, timeout=10)
        took = time.monotonic() - started
    assert ended.outcome == "stopped"
    assert took < 3, f"the stop took {took:.1f} s"
    eventually(
        lambda: "Disconnected from client" in remote.server.log() or None,
        5,
        "the server to see the client go away",
    )
    idle = cpu_over(pgid, 2.0)
    assert idle < 0.3, f"the server used {idle:.2f} s of CPU in the 2 s after the stop"


def test_bad_configuration_fails_the_turn_with_a_sentence(remote: RemoteStack) -> None:
    with pytest.raises(IngressError) as refused:
        remote.ingress.wake("acme.unknown-model", Message("Hi", spec=spec("unknown", "nope")))
    assert refused.value.status == 422
    assert "this deployment has no model 'nope'" in refused.value.message

    remote.send("acme.unreachable", "Hi", spec("unreachable", "dead"))
    unreachable = remote.ended("acme.unreachable", timeout=60)
    assert unreachable.outcome == "failed"
    assert "The model 'dead' could not be reached at http://127.0.0.1:" in unreachable.reason


def test_the_api_key_is_in_no_journal_event_log_or_error(remote: RemoteStack) -> None:
    address = "acme.remote-secret"
    remote.send(address, "Say hello.", spec("remote-secret", "remote"))
    assert remote.ended(address).outcome == "succeeded"
    # A server whose error repeats the key it was sent: the turn's reason does not.
    remote.send("acme.remote-echo", "Hello?", spec("remote-echo", "echoing"))
    echoed = remote.ended("acme.remote-echo", timeout=60)
    assert "answered 500" in echoed.reason
    assert "[api key]" in echoed.reason
    assert API_KEY not in echoed.reason

    journal = _sql(remote.settings, "SELECT * FROM sys_journal")
    assert "model remote r1" in journal, "the journal was read"
    assert API_KEY not in journal
    assert API_KEY not in _sql(remote.settings, "SELECT * FROM state")
    auth = {"Authorization": f"Bearer {remote.key}"}
    agents = remote.http.get("/v1/agents?limit=200", headers=auth).json()
    for agent in agents["agents"]:
        page = remote.http.get(f"/v1/agents/{agent['address']}/timeline?limit=500", headers=auth)
        assert API_KEY not in page.text
    logs = list((remote.settings.home / "logs").glob("*.log"))
    assert logs
    for log in logs:
        if "server" not in log.name:  # the model servers were given the key on purpose
            assert API_KEY not in log.read_text(errors="replace"), log.name


def _sql(settings: Settings, query: str) -> str:
    response = httpx.post(
        f"{settings.admin_url}/query",
        json={"query": query},
        headers={"accept": "application/json"},
        timeout=30,
    )
    assert response.is_success, response.text
    return response.text
