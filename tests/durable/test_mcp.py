"""MCP servers as tool sources, on a real stack with real servers: `mcp-server-time` over
stdio and `@modelcontextprotocol/server-everything` over streamable HTTP. An agent on the
scripted model lists and calls their tools; results land on the timeline; the prompt's
prefix fingerprint holds across turns; configured secrets appear nowhere."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from schemas.events import ArtifactWritten, ModelMessage, ToolFinished
from schemas.spec import AgentSpec, Limits, Policy
from schemas.wake import Message
from services.executor.scripted import script
from services.ingress import Ingress, IngressError
from services.stack import Stack, free_port, isolated_settings
from tests.durable.conftest import LiveStack, eventually
from tests.fixtures.serving import start

pytestmark = pytest.mark.durable

ROOT = Path(__file__).resolve().parents[2]
EVERYTHING = ROOT / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
ENV_SECRET = "env-secret-4b1d9c0e7a"  # noqa: S105 - a test value sought in the records
HEADER_SECRET = "header-secret-93f2aa61d0"  # noqa: S105 - a test value sought in the records


@dataclass
class McpStack:
    folder: Path
    """The test server's: its `calls` file and the `release-NOTE` files it waits for."""
    live: LiveStack
    admin_url: str


def _everything(port: int) -> subprocess.Popen[str]:
    """server-everything over streamable HTTP, returned once it says it listens."""
    process = subprocess.Popen(
        ["node", str(EVERYTHING), "streamableHttp"],
        env={"PATH": "/usr/bin:/bin:/usr/local/bin", "PORT": str(port)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if "listening" in line.lower():
            return process
    process.kill()
    raise AssertionError("server-everything exited before it listened")


def _servers_file(folder: Path, port: int, local: int) -> Path:
    secret_file = folder / "everything.token"
    secret_file.write_text(HEADER_SECRET)
    path = folder / "mcp.toml"
    path.write_text(
        f"""
[servers.time]
command = {json.dumps(sys.executable)}
args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
env = {{ TIME_TOKEN = {{ from_env = "TEST_MCP_TOKEN" }} }}

[servers.everything]
url = "http://127.0.0.1:{port}/mcp"
headers = {{ X-Api-Token = {{ from_file = {json.dumps(str(secret_file))} }} }}
tenants = ["test"]

[servers.gone]
url = "http://127.0.0.1:{free_port()}/mcp"

[servers.local]
url = "http://127.0.0.1:{local}/mcp"
headers = {{ X-Api-Token = {{ from_file = {json.dumps(str(secret_file))} }} }}
"""
    )
    return path


@pytest.fixture(scope="module")
def mcp_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpStack]:
    if not EVERYTHING.exists():
        pytest.fail("server-everything is not installed: run npm ci")
    folder = tmp_path_factory.mktemp("mcp")
    port, local_port = free_port(), free_port()
    server = _everything(port)
    local = start("tests.fixtures.mcp_server", local_port, str(folder))
    try:
        settings = isolated_settings(
            tmp_path_factory.mktemp("home"),
            mcp_servers_file=_servers_file(folder, port, local_port),
        )
        with Stack(settings, gateway=False, endpoint_env={"TEST_MCP_TOKEN": ENV_SECRET}) as stack:
            for service in ("Agent", "Effects"):
                response = httpx.patch(
                    f"{settings.admin_url}/services/{service}", json={"journal_retention": "1h"}
                )
                assert response.is_success, response.text
            ingress = Ingress(settings.ingress_url)
            yield McpStack(
                folder,
                LiveStack(settings, stack.restate, stack.endpoint, ingress),
                settings.admin_url,
            )
            ingress.close()
    finally:
        local.kill()
        local.wait()
        server.kill()
        server.wait()
        if server.stdout is not None:
            server.stdout.close()


def _spec(tools: dict[str, Policy]) -> AgentSpec:
    return AgentSpec(
        kind="mcp",
        instructions="Follow the script.",
        model="script",
        tools=tools,
        limits=Limits(max_rounds=6),
    )


GRANTS: dict[str, Policy] = {"mcp:time/*": "allow", "mcp:everything/echo": "allow"}
TURN = script(
    {"calls": [{"name": "mcp:time/get_current_time", "arguments": {"timezone": "UTC"}}]},
    {"calls": [{"name": "mcp:everything/echo", "arguments": {"message": "over http"}}]},
    {"reply": "{results}"},
)


def _finished(live: LiveStack, address: str) -> list[ToolFinished]:
    return [e.body for e in live.events(address) if isinstance(e.body, ToolFinished)]


def test_an_agent_calls_a_stdio_and_an_http_server_and_the_prefix_holds(
    mcp_stack: McpStack, address: str
) -> None:
    live = mcp_stack.live
    first = live.ingress.message(address, TURN, _spec(GRANTS))
    assert first.status.last_outcome == "succeeded", first
    second = live.ingress.message(address, TURN, _spec(GRANTS))
    assert second.status.last_outcome == "succeeded", second
    finished = _finished(live, address)
    assert [f.name for f in finished] == ["mcp:time/get_current_time", "mcp:everything/echo"] * 2
    assert all(f.status == "ok" for f in finished), finished
    assert '"timezone": "UTC"' in finished[0].content
    assert finished[1].content == "Echo: over http"
    prints = {e.body.fingerprint for e in live.events(address) if isinstance(e.body, ModelMessage)}
    assert len(prints) == 1
    assert prints != {""}


def test_only_granted_tools_are_shown(mcp_stack: McpStack, address: str) -> None:
    live = mcp_stack.live
    turn = script(
        {"calls": [{"name": "mcp:everything/get-sum", "arguments": {"a": 1, "b": 2}}]},
        {"reply": "{results}"},
    )
    result = live.ingress.message(address, turn, _spec(GRANTS))
    assert result.status.last_outcome == "succeeded", result
    (refused,) = _finished(live, address)
    assert refused.status == "error"
    assert "mcp:everything/echo" in refused.content
    assert "mcp:time/get_current_time" in refused.content


def test_images_and_binary_resources_are_kept_as_artifacts_by_hash(
    mcp_stack: McpStack, address: str
) -> None:
    live = mcp_stack.live
    blob = {"resourceType": "Blob", "resourceId": 2}
    turn = script(
        {"calls": [{"name": "mcp:everything/get-tiny-image", "arguments": {}}]},
        {"calls": [{"name": "mcp:everything/get-resource-reference", "arguments": blob}]},
        {"reply": "{results}"},
    )
    grants: dict[str, Policy] = {"mcp:everything/*": "allow"}
    result = live.ingress.message(address, turn, _spec(grants))
    assert result.status.last_outcome == "succeeded", result
    image, resource = _finished(live, address)
    written = [e.body for e in live.events(address) if isinstance(e.body, ArtifactWritten)]
    for finished, kept in zip((image, resource), written, strict=True):
        assert finished.status == "ok", finished
        assert f"kept as artifact {kept.sha256}" in finished.content
        assert kept.path.startswith("mcp/everything/t1-r")
        stored = live.settings.home / "artifacts" / kept.sha256[:2] / kept.sha256
        content = stored.read_bytes()
        assert hashlib.sha256(content).hexdigest() == kept.sha256
        assert len(content) == kept.size
    assert "image/png" in image.content
    assert written[0].path.endswith(".png")
    assert written[0].path.split("/")[2] != written[1].path.split("/")[2]


def test_a_server_that_cannot_be_listed_is_named_to_the_model(
    mcp_stack: McpStack, address: str
) -> None:
    live = mcp_stack.live
    grants: dict[str, Policy] = {"mcp:gone/*": "allow", "mcp:everything/echo": "allow"}
    result = live.ingress.message(address, script({"reply": "{system}"}), _spec(grants))
    assert result.status.last_outcome == "succeeded", result
    assert result.reply.startswith("Follow the script.\n\nThe MCP server gone ")
    assert result.reply.endswith("Its tools are not available this turn.")
    assert "Traceback" not in result.reply


def test_a_server_the_tenant_may_not_use_is_refused_with_a_sentence(mcp_stack: McpStack) -> None:
    with pytest.raises(IngressError, match="may not use the MCP server 'everything'"):
        mcp_stack.live.ingress.message("other.mcp-refused", "hello", _spec(GRANTS))


def test_a_server_that_is_down_gives_the_model_a_sentence(
    mcp_stack: McpStack, address: str
) -> None:
    live = mcp_stack.live
    turn = script(
        {
            "calls": [
                {"name": "mcp:time/get_current_time", "arguments": {"timezone": "Nowhere/Land"}}
            ]
        },
        {"reply": "{results}"},
    )
    result = live.ingress.message(address, turn, _spec(GRANTS))
    assert result.status.last_outcome == "succeeded", result
    (answer,) = _finished(live, address)
    assert answer.status == "error"
    assert "Traceback" not in answer.content


def test_secrets_appear_in_no_journal_state_timeline_or_log(
    mcp_stack: McpStack, address: str
) -> None:
    live = mcp_stack.live
    turn = script(
        {"calls": [{"name": "mcp:everything/echo", "arguments": {"message": "x"}}]},
        {"reply": "{results}"},
    )
    assert live.ingress.message(address, turn, _spec(GRANTS)).status.last_outcome == "succeeded"
    seen = [json.dumps([e.body for e in live.events(address)], default=str)]
    for table in ("sys_journal", "state"):
        response = httpx.post(
            f"{mcp_stack.admin_url}/query",
            json={"query": f"SELECT * FROM {table}"},  # noqa: S608 - two fixed names
            headers={"Accept": "application/json"},
            timeout=30,
        )
        assert response.is_success, response.text
        assert "mcp:everything/echo" in response.text or table == "state"
        seen.append(response.text)
    seen += [
        p.read_text(errors="replace")
        for p in live.home.rglob("*")
        if p.is_file() and p.suffix in {".log", ".txt", ""}
    ]
    for text in seen:
        assert ENV_SECRET not in text
        assert HEADER_SECRET not in text


LOCAL: dict[str, Policy] = {"mcp:local/*": "allow"}


def _calls(mcp: McpStack, what: str) -> list[str]:
    path = mcp.folder / "calls"
    lines = path.read_text().splitlines() if path.exists() else []
    return [line for line in lines if line.startswith(what)]


def test_the_idempotency_key_is_a_header_and_a_secret_said_back_is_blanked(
    mcp_stack: McpStack, address: str
) -> None:
    live = mcp_stack.live
    turn = script({"calls": [{"name": "mcp:local/headers", "arguments": {}}]}, {"reply": "ok"})
    assert live.ingress.message(address, turn, _spec(LOCAL)).status.last_outcome == "succeeded"
    (answer,) = _finished(live, address)
    assert answer.content.startswith(f"key={address}/")
    assert answer.content.endswith("token=[secret]"), "the server got the token; it is blanked"


def _crash_mid_call(mcp: McpStack, address: str, tool: str, note: str) -> list[ToolFinished]:
    """A turn that calls `tool`; the endpoint SIGKILLed once the call reached the server,
    started again, and the server let go once the turn went on without it or retried."""
    live = mcp.live
    turn = script(
        {"calls": [{"name": f"mcp:local/{tool}", "arguments": {"note": note}}]},
        {"reply": "{results}"},
    )
    live.ingress.send_wake(address, Message(turn, spec=_spec(LOCAL)))
    eventually(lambda: _calls(mcp, f"{tool.split('_')[1]} {note}") or None, 60, "the call")
    live.restart_endpoint(kill=True)
    (mcp.folder / f"release-{note}").touch()
    assert live.wait_for_turn_end(address, 1).outcome == "succeeded"
    return _finished(live, address)


def test_a_side_effecting_call_cut_by_a_crash_ran_once_and_says_unknown(
    mcp_stack: McpStack, address: str
) -> None:
    (answer,) = _crash_mid_call(mcp_stack, address, "slow_write", "w1")
    assert answer.status == "unknown"
    assert "may or may not have taken effect" in answer.content
    assert len(_calls(mcp_stack, "write w1")) == 1, "never sent again"


def test_a_read_only_call_cut_by_a_crash_is_sent_again_and_succeeds(
    mcp_stack: McpStack, address: str
) -> None:
    (answer,) = _crash_mid_call(mcp_stack, address, "slow_read", "r1")
    assert (answer.status, answer.content) == ("ok", "read r1")
    sent = _calls(mcp_stack, "read r1")
    assert len(sent) == 2, sent
    assert len({line.split()[-1] for line in sent}) == 1, "both with the same key"
