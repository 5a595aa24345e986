"""Spec mistakes get one sentence naming the file (or body) and the field, from the one
checker the CLI, the gateway and the Tenant object share."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from schemas.spec import LIMIT_BOUNDS, AgentSpec, Limits
from services.cli.main import main
from services.specs import Offer, SpecError, load_spec, parse_spec

OFFER = Offer(models=("script", "smollm2"), tools=("calculator", "ledger"))
GOOD = 'kind = "x"\ninstructions = "y"\nmodel = "script"\ntools = ["calculator"]\n'

SPEC = 'kind = "x"\ninstructions = "y"\n'
MISTAKES = [
    (SPEC + 'modle = "script"\n', "unknown field 'modle'. Did you mean 'model'?"),
    (GOOD + "version = 7\n", "field 'version' (7) cannot be set: publishing numbers"),
    (
        GOOD + "[limits]\nmax_rounds = -3\n",
        "field 'limits.max_rounds' is -3; it must be a whole number from 1 to 100.",
    ),
    (GOOD + "[limits]\nmax_rounds = 0\n", "field 'limits.max_rounds' is 0;"),
    (
        GOOD + "[limits]\nmax_rounds = 99999999999999999999999\n",
        "'limits.max_rounds' is 99999999999999999999999;",
    ),
    (
        GOOD + "[limits]\nmax_round = 3\n",
        "unknown field 'limits.max_round'. Did you mean 'limits.max_rounds'?",
    ),
    (
        GOOD + "[memory]\nextracts = true\n",
        "unknown field 'memory.extracts'. Did you mean 'memory.extract'? Memory settings are: "
        "extract, tenant_writes.",
    ),
    (GOOD + '[memory]\nextract = "yes"\n', "memory.extract"),
    (
        GOOD + "[limits]\nmax_turn_seconds = 1e9\n",
        "'limits.max_turn_seconds' is 1000000000.0; it must be a number from 0 to 86400.",
    ),
    (GOOD + "[limits]\nmax_tokens = 2.5\n", "'limits.max_tokens' is 2.5; it must be a whole"),
    (GOOD + 'can_spawn = "yes"\n', "field 'can_spawn': Expected `bool`, got `str`."),
    (
        SPEC + 'model = "nosuchmodel"\n',
        "field 'model': this deployment has no model 'nosuchmodel'. It offers: ",
    ),
    (SPEC + 'model = "smolm2"\n', "no model 'smolm2'; did you mean 'smollm2'?"),
    (
        SPEC + 'fallback = ["smollm2", "smolm2"]\n',
        "field 'fallback': this deployment has no model 'smolm2'; did you mean 'smollm2'?",
    ),
    (SPEC + 'tools = ["nosuchtool"]\n', "field 'tools': this deployment has no tool 'nosuchtool'."),
    ('kind = "a b"\ninstructions = "y"\n', "field 'kind' ('a b') must be 1 to 48 of A-Z a-z"),
    ('instructions = "y"\n', "Object missing required field `kind`."),
    (
        SPEC + '[input]\ntype = "array"\n',
        'field \'input\' must be the schema of an object ("type": "object")',
    ),
    (
        SPEC + '[input]\ntype = "object"\nproperties = { agent = { type = "string" } }\n',
        "field 'input' declares agent: every kind's tool takes agent and idempotency_key",
    ),
    (
        SPEC + '[input]\ntype = "object"\nproperties = { n = { minimum = "one" } }\n',
        "field 'input' is not a JSON schema (draft 2020-12): at properties/n/minimum, the "
        "'type' rule of the meta-schema is not met.",
    ),
    (SPEC + 'input = "name"\n', "field 'input': Expected `object`, got `str`."),
]


@pytest.mark.parametrize(("text", "says"), MISTAKES)
def test_each_mistake_in_a_spec_file_names_the_file_and_the_field(
    tmp_path: Path, text: str, says: str
) -> None:
    path = tmp_path / "t.toml"
    path.write_text(text)
    with pytest.raises(SpecError) as refused:
        load_spec(path, OFFER)
    assert str(refused.value).startswith(f"The spec file {path}: ")
    assert says in str(refused.value)


def test_a_missing_model_names_why_the_deployment_lacks_it(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(SPEC + 'model = "vllm"\n')
    why = "The models file /etc/models.toml is malformed: Invalid TOML."
    with pytest.raises(SpecError) as refused:
        load_spec(path, Offer(models=("smollm2",), tools=(), problem=why))
    assert str(refused.value).endswith(f"no model 'vllm'. It offers: smollm2. {why}")


def test_a_good_spec_file_decodes_as_agents_run_it(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(GOOD + "[limits]\nmax_rounds = 100\nmax_turn_seconds = 2\n")
    spec = load_spec(path, OFFER)
    assert spec == AgentSpec(
        "x", "y", model="script", tools=("calculator",), limits=Limits(100, max_turn_seconds=2)
    )


def test_every_limit_has_bounds_and_the_defaults_are_within_them() -> None:
    defaults = msgspec.structs.asdict(Limits())
    assert set(LIMIT_BOUNDS) == set(defaults)
    for name, value in defaults.items():
        low, high = LIMIT_BOUNDS[name]
        assert low <= value <= high, name


def test_a_spec_as_the_cli_encodes_it_passes_the_publish_check() -> None:
    """The CLI sends the whole struct (with `version: 0` and every limit)."""
    spec = AgentSpec("x", "y", model="script")
    raw = msgspec.json.decode(msgspec.json.encode(spec))
    assert parse_spec(raw, "The published spec", OFFER) == spec


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Settings for a deployment with the test tools and nothing listening on ingress."""
    monkeypatch.setenv("TEASPILL_HOME", str(tmp_path))
    monkeypatch.setenv("TEASPILL_TOOL_MODULES", '["tests.fixtures.tools"]')
    monkeypatch.setenv("TEASPILL_INGRESS_PORT", "9")
    return tmp_path


OFFERED = ("this deployment has no", "no model '")
"""Mistakes only the deployment's offer shows: the CLI asks the deployment for it."""


@pytest.mark.parametrize(
    ("text", "says"), [m for m in MISTAKES if not any(word in m[1] for word in OFFERED)]
)
@pytest.mark.parametrize("command", ["publish", "send"])
def test_the_cli_prints_the_sentence_and_sends_nothing(
    offline: Path, capsys: pytest.CaptureFixture[str], text: str, says: str, command: str
) -> None:
    path = offline / "t.toml"
    path.write_text(text)
    argv = {
        "publish": ["specs", "publish", "acme", str(path)],
        "send": ["send", "acme.x", "hi", "--spec", str(path)],
    }[command]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"teaspill: The spec file {path}: ")
    assert says in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("command", ["publish", "send"])
def test_the_cli_says_plainly_when_it_could_not_ask_the_deployment(
    offline: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """Its own shell's settings say nothing of the deployment's models: it does not guess."""
    path = offline / "t.toml"
    path.write_text(GOOD)
    argv = {
        "publish": ["specs", "publish", "acme", str(path)],
        "send": ["send", "acme.x", "hi", "--spec", str(path)],
    }[command]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("teaspill: Could not ask the deployment which models and tools")
    assert "is the stack running?" in err
    assert len(err.splitlines()) == 1


def test_every_problem_of_one_spec_is_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(
        'kind = "x"\ninstructions = "y"\nmodle = "script"\nfallback = ["smolm2"]\n'
        'tools = ["nosuchtool"]\n[limits]\nmax_rounds = 0\nmax_round = 3\n'
    )
    with pytest.raises(SpecError) as refused:
        load_spec(path, OFFER)
    said = str(refused.value)
    assert said.startswith(f"The spec file {path}: 5 problems. (1) unknown field 'modle'.")
    for part in (
        "(2) unknown field 'limits.max_round'",
        "(3) field 'limits.max_rounds' is 0",
        "(4) field 'fallback': this deployment has no model 'smolm2'",
        "(5) field 'tools': this deployment has no tool 'nosuchtool'",
    ):
        assert part in said
    assert refused.value.field == "modle"
    assert "\n" not in said


def test_an_input_schema_is_kept_as_written(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(
        GOOD + '[input]\ntype = "object"\nrequired = ["name"]\n'
        '[input.properties.name]\ntype = "string"\n'
    )
    assert load_spec(path, OFFER).input == {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string"}},
    }
