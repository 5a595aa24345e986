"""The servers file, MCP grants and what a spec may name: pure, no server."""

from __future__ import annotations

from pathlib import Path

import mcp_types
import pytest

from schemas.spec import AgentSpec, granted, narrowed
from services.mcp.config import Secret, SecretMissingError, load_servers, resolved
from services.mcp.content import content_text
from services.settings import ConfigError
from services.specs import Offer, SpecError, check_spec

GOOD = """
[servers.time]
command = "python3"
args = ["-m", "mcp_server_time"]
env = { PLAIN = "x", TOKEN = { from_env = "MCP_TEST_TOKEN" } }

[servers.tracker]
url = "https://tracker.example/mcp"
headers = { Authorization = { from_file = "/run/secrets/t" } }
tenants = ["acme"]
"""


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mcp.toml"
    path.write_text(text)
    return path


def test_a_servers_file_keeps_where_secrets_are_never_their_values(tmp_path: Path) -> None:
    servers = load_servers(_file(tmp_path, GOOD))
    assert servers["time"].env == {"PLAIN": "x", "TOKEN": Secret(env="MCP_TEST_TOKEN")}
    assert servers["tracker"].headers == {"Authorization": Secret(file="/run/secrets/t")}
    assert servers["time"].allows("anyone")
    assert servers["tracker"].allows("acme")
    assert not servers["tracker"].allows("other")


def test_a_secret_is_read_when_asked_and_a_missing_one_names_its_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TEST_TOKEN", "t0ken")
    assert resolved({"TOKEN": Secret(env="MCP_TEST_TOKEN"), "PLAIN": "x"}) == {
        "TOKEN": "t0ken",
        "PLAIN": "x",
    }
    monkeypatch.delenv("MCP_TEST_TOKEN")
    with pytest.raises(SecretMissingError, match="MCP_TEST_TOKEN is not set"):
        resolved({"TOKEN": Secret(env="MCP_TEST_TOKEN")})
    with pytest.raises(SecretMissingError, match="cannot be read"):
        Secret(file=str(tmp_path / "absent")).value()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[servers.a]\n", "exactly one of 'command'"),
        ('[servers.a]\ncommand = "x"\nurl = "http://h"\n', "exactly one of 'command'"),
        ('[servers.a]\nurl = "ftp://h"\n', "must start with http"),
        ('[servers.A]\ncommand = "x"\n', "1 to 32 of a-z"),
        ('[servers.a]\ncommand = "x"\nport = 3\n', "unknown fields port"),
        ('[servers.a]\ncommand = "x"\nenv = { K = { from_vault = "v" } }\n', "from_env"),
        ('[servers.a]\ncommand = "x"\nheaders = { K = "v" }\n', "a stdio server takes"),
        ('[servers.a]\ncommand = "x"\ntenants = "acme"\n', "'tenants' must be a list"),
        ("[servers\n", "not valid TOML"),
    ],
)
def test_a_bad_servers_file_is_a_sentence(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        load_servers(_file(tmp_path, text))


def test_a_whole_server_grant_yields_to_a_tools_own() -> None:
    spec = AgentSpec(
        kind="k", instructions="", tools={"mcp:time/*": "allow", "mcp:time/convert": "ask"}
    )
    known = ["mcp:time/now", "mcp:time/convert", "mcp:other/now", "calculator"]
    assert granted(spec, known) == {"mcp:time/now": "allow", "mcp:time/convert": "ask"}


OFFER = Offer(
    models=("smollm2",), tools=("calculator",), mcp={"time": None, "tracker": frozenset({"acme"})}
)


@pytest.mark.parametrize(
    ("tools", "tenant", "said"),
    [
        (("mcp:tracker/*",), "other", "the tenant other may not use the MCP server 'tracker'"),
        (("mcp:nope/x",), "acme", "no MCP server 'nope'"),
        (("mcp:time",), "acme", "is not an MCP grant"),
    ],
)
def test_a_spec_naming_a_server_it_may_not_use_is_refused(
    tools: tuple[str, ...], tenant: str, said: str
) -> None:
    spec = AgentSpec(kind="k", instructions="", tools=tools)
    with pytest.raises(SpecError, match=said):
        check_spec(spec, "The spec", OFFER, tenant)


def test_a_spec_granting_servers_its_tenant_may_use_is_accepted() -> None:
    spec = AgentSpec(kind="k", instructions="", tools=("mcp:time/*", "mcp:tracker/create"))
    check_spec(spec, "The spec", OFFER, "acme")


def test_results_keep_text_and_name_what_is_left_out() -> None:
    answer = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(text="hello"),
            mcp_types.ImageContent(data="AAAA", mime_type="image/png"),
        ]
    )
    assert (
        content_text(answer)
        == "hello\n[image content (image/png) left out: only text reaches the model]"
    )


def test_a_child_may_be_given_one_tool_of_a_server_its_parent_has_whole() -> None:
    parent = AgentSpec(
        kind="k", instructions="", tools={"mcp:time/*": "ask", "calculator": "allow"}
    )
    child = narrowed(parent, ["mcp:time/now", "mcp:other/now", "calculator"])
    assert child.tools == {"mcp:time/now": "ask", "calculator": "allow"}
