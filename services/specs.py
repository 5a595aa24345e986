"""Agent specs checked in one place, whoever sends them: a spec file the CLI reads, the
body of `POST /v1/specs`, a publish or an inline spec through Restate ingress.

A spec is refused with a sentence naming where it came from and each field at fault (every
problem of one spec at once, so three typos take one fix, not three publishes): unknown
fields (with the closest known one), a `version` (publishing assigns it), a kind that is
not a name, limits outside their documented bounds (`schemas.spec.LIMIT_BOUNDS`), values
of the wrong JSON type (no coercion: `"yes"` is not a boolean), and, when the deployment's
offer is known, models and tools it does not have.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from jsonschema import Draft202012Validator, SchemaError

from schemas.mcp import PREFIX as MCP_PREFIX
from schemas.pages import PAGE_PREFIX, PAGE_TOOL_PATTERN
from schemas.sandbox import SandboxPolicy, workspace_refusal
from schemas.spec import (
    KIND_PATTERN,
    LIMIT_BOUNDS,
    MAX_INPUT_SCHEMA,
    MAX_INSTRUCTIONS,
    RESERVED_INPUT,
    WHOLE_LIMITS,
    AgentSpec,
    Limits,
    MemorySettings,
    grants,
)
from services.compositions import check_composition


class SpecError(ValueError):
    """A spec that is refused; `field` is the dotted name of the (first) field at fault."""

    def __init__(self, source: str, problem: str, field: str | None = None) -> None:
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem
        self.field = field


class _Problems:
    """The problems one spec has, gathered so that all of them are reported at once."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.found: list[SpecError] = []

    def add(self, problem: str, field: str | None = None) -> None:
        self.found.append(SpecError(self.source, problem, field))

    def raise_any(self) -> None:
        if not self.found:
            return
        if len(self.found) == 1:
            raise self.found[0]
        listed = " ".join(f"({n}) {e.problem}" for n, e in enumerate(self.found, start=1))
        raise SpecError(self.source, f"{len(self.found)} problems. {listed}", self.found[0].field)


@dataclass(frozen=True)
class Offer:
    """The model and tool names a deployment has."""

    models: tuple[str, ...]
    tools: tuple[str, ...]
    problem: str = ""
    """Why some models are missing (a models file that cannot be used), or empty."""
    sandbox: SandboxPolicy = dataclasses.field(default_factory=SandboxPolicy)
    """Who may have the network in a workspace, and the ceilings on its limits."""
    mcp: Mapping[str, frozenset[str] | None] | None = None
    """The operator's MCP servers, each with the tenants that may use it (None: all); None
    where they are not known (a client checking before it sends): MCP grants are then
    checked by the deployment alone."""
    harnesses: tuple[str, ...] | None = None
    """The harnesses specs may name; None where they are not known (a client checking
    before it sends)."""


def load_spec(path: Path, offer: Offer | None = None) -> AgentSpec:
    """A spec file, TOML or (by its `.json` suffix) JSON."""
    try:
        text = path.read_text()
    except OSError as error:
        raise SpecError(f"Cannot read the spec file {path}", f"{error.strerror}.") from error
    return parse_spec(_parse(path, text), f"The spec file {path}", offer)


def parse_spec(
    raw: object, source: str, offer: Offer | None = None, tenant: str | None = None
) -> AgentSpec:
    """Decode and check a spec from plain data (a JSON or TOML document); with an offer
    and the tenant, the workspace is checked against the operator's policy too."""
    if not isinstance(raw, dict):
        raise SpecError(source, "a spec must be an object (a table) of fields, such as kind.")
    problems = _Problems(source)
    _known_fields(raw, AgentSpec, "", problems)
    version = raw.get("version", 0)
    if version != 0 or type(version) is not int:
        problems.add(
            f"field 'version' ({version!r}) cannot be set: publishing numbers the versions of "
            "a kind 1, 2, 3... by itself, and a turn runs the newest one. Leave it out.",
            "version",
        )
    limits = raw.get("limits")
    if isinstance(limits, dict):
        _known_fields(limits, Limits, "limits.", problems)
        _limits_in_bounds(limits, problems)
    if isinstance(memory := raw.get("memory"), dict):
        _known_fields(memory, MemorySettings, "memory.", problems)
    # Decoding needs the fields above to be right: decode what is known of the rest.
    known = {k: v for k, v in raw.items() if k in AgentSpec.__struct_fields__ and k != "version"}
    if isinstance(limits, dict):
        refused = {problem.field for problem in problems.found}
        known["limits"] = {
            k: v
            for k, v in limits.items()
            if k in Limits.__struct_fields__ and f"limits.{k}" not in refused
        }
    spec = _convert(known, problems)
    if spec is not None:
        _check(spec, offer, tenant, problems, bounds=not isinstance(limits, dict))
    problems.raise_any()
    assert spec is not None
    return spec


def check_spec(
    spec: AgentSpec, source: str, offer: Offer | None = None, tenant: str | None = None
) -> None:
    """The checks a decoded spec still needs: its kind, sizes, bounds and names, and (with
    an offer and the tenant) the operator's workspace policy."""
    problems = _Problems(source)
    _check(spec, offer, tenant, problems, bounds=True)
    problems.raise_any()


def _check(
    spec: AgentSpec,
    offer: Offer | None,
    tenant: str | None,
    problems: _Problems,
    *,
    bounds: bool,
) -> None:
    if not re.fullmatch(KIND_PATTERN, spec.kind):
        problems.add(f"field 'kind' ({spec.kind!r}) must be 1 to 48 of A-Z a-z 0-9 - _.", "kind")
    if len(spec.instructions) > MAX_INSTRUCTIONS:
        problems.add(
            f"field 'instructions' is {len(spec.instructions)} characters; at most "
            f"{MAX_INSTRUCTIONS} are accepted.",
            "instructions",
        )
    if bounds:
        _limits_in_bounds(msgspec.structs.asdict(spec.limits), problems)
    if spec.input:
        _input_schema(spec.input, problems)
    check_composition(spec, problems.add)
    if offer is not None:
        _offered(spec, offer, problems)
        _mcp_grants(spec, offer, tenant, problems)
        refused = workspace_refusal(spec.workspace, tenant, offer.sandbox) if tenant else ""
        if refused:
            problems.add(refused, "workspace")


def _known_fields(
    raw: dict[str, Any], type_: type[msgspec.Struct], prefix: str, problems: _Problems
) -> None:
    known = sorted(f.name for f in msgspec.structs.fields(type_) if f.name != "version")
    for name in sorted(set(raw) - {*known, "version"}):
        close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.6)
        hint = f" Did you mean '{prefix}{close[0]}'?" if close else ""
        what = {"limits.": "Limits are", "memory.": "Memory settings are"}.get(prefix, "A spec has")
        problems.add(
            f"unknown field '{prefix}{name}'.{hint} {what}: {', '.join(known)}.",
            f"{prefix}{name}",
        )


def _limits_in_bounds(limits: dict[str, Any], problems: _Problems) -> None:
    for name, value in limits.items():
        if name not in LIMIT_BOUNDS:
            continue
        low, high = LIMIT_BOUNDS[name]
        whole = name in WHOLE_LIMITS
        number = type(value) is int or (type(value) is float and not whole)
        if not number or not low <= value <= high:
            kind = "a whole number" if whole else "a number"
            problems.add(
                f"field 'limits.{name}' is {value!r}; it must be {kind} from {low:g} to {high:g}.",
                f"limits.{name}",
            )


def _input_schema(schema: dict[str, Any], problems: _Problems) -> None:
    """An input schema is a JSON schema (draft 2020-12) of an object that leaves the
    arguments every kind's tool takes to the gateway."""
    size = len(msgspec.json.encode(schema))
    if size > MAX_INPUT_SCHEMA:
        problems.add(
            f"field 'input' is {size} bytes of JSON; at most {MAX_INPUT_SCHEMA} are accepted.",
            "input",
        )
        return
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        where = "/".join(str(part) for part in error.path) or "its top level"
        problems.add(
            f"field 'input' is not a JSON schema (draft 2020-12): at {where}, the "
            f"'{error.validator}' rule of the meta-schema is not met.",
            "input",
        )
        return
    if schema.get("type") != "object":
        problems.add(
            'field \'input\' must be the schema of an object ("type": "object"): a call\'s '
            "arguments are an object.",
            "input",
        )
    properties = schema.get("properties")
    taken = sorted(set(RESERVED_INPUT) & set(properties or {}))
    if taken:
        problems.add(
            f"field 'input' declares {', '.join(taken)}: every kind's tool takes "
            f"{' and '.join(RESERVED_INPUT)} itself; name the input's own fields otherwise.",
            "input",
        )


def _offered(spec: AgentSpec, offer: Offer, problems: _Problems) -> None:
    for field, name in [("model", spec.model), *(("fallback", f) for f in spec.fallback)]:
        if name not in offer.models:
            absent = _absent(field, "model", name, offer.models)
            problems.add(f"{absent} {offer.problem}".rstrip(), field)
    if offer.harnesses is not None and spec.harness not in offer.harnesses:
        problems.add(_absent("harness", "harness", spec.harness, offer.harnesses), "harness")
    for name in grants(spec):
        if name.startswith(PAGE_PREFIX):
            _page_grant(name, problems)
        elif name not in offer.tools and not name.startswith(MCP_PREFIX):
            problems.add(_absent("tools", "tool", name, offer.tools), "tools")


def _page_grant(name: str, problems: _Problems) -> None:
    """A page's tools are declared by the page, so only the grant's shape is checked."""
    tool = name[len(PAGE_PREFIX) :]
    if tool != "*" and not re.fullmatch(PAGE_TOOL_PATTERN, tool):
        problems.add(
            f"field 'tools': {name!r} is not a page grant; write page:NAME (a name of 1 to 64 "
            "letters, digits, _ and -) for one tool the page declares, or page:* for all.",
            "tools",
        )


def _mcp_grants(spec: AgentSpec, offer: Offer, tenant: str | None, problems: _Problems) -> None:
    """An MCP grant names a configured server its tenant may use; its tools are not known
    until a turn lists them, so only the server is checked."""
    if offer.mcp is None:
        return
    for name in grants(spec):
        if not name.startswith(MCP_PREFIX):
            continue
        server, slash, tool = name[len(MCP_PREFIX) :].partition("/")
        if not slash or not server or not tool:
            problems.add(
                f"field 'tools': {name!r} is not an MCP grant; write mcp:SERVER/TOOL for one "
                "tool or mcp:SERVER/* for all of a server's tools.",
                "tools",
            )
        elif server not in offer.mcp:
            problems.add(_absent("tools", "MCP server", server, tuple(sorted(offer.mcp))), "tools")
        elif (
            tenant is not None
            and (allowed := offer.mcp[server]) is not None
            and tenant not in allowed
        ):
            problems.add(
                f"field 'tools': the tenant {tenant} may not use the MCP server {server!r}; the "
                "operator's servers file names the tenants that may.",
                "tools",
            )


def _absent(field: str, what: str, name: str, offered: tuple[str, ...]) -> str:
    return (
        f"field '{field}': this deployment has no {what} {name!r}{_closest(name, offered)}"
        f" It offers: {', '.join(offered) or 'none'}."
    )


def _closest(name: str, names: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else "."


def _convert(raw: dict[str, Any], problems: _Problems) -> AgentSpec | None:
    """The spec, or None with the first value of the wrong type added to `problems` (the
    decoder stops at the first one)."""
    try:
        return msgspec.convert(raw, type=AgentSpec)
    except msgspec.ValidationError as error:
        problem, _, where = str(error).partition(" - at `$.")
        field = where.rstrip("`").replace("[...]", "") or None
        said = f"field '{field}': {problem}." if field else f"{problem}."
        if field == "tools":
            said += " Tools are a list of names, or a table of names to allow, ask or deny."
        problems.add(said, field)
        return None


def _parse(path: Path, text: str) -> Any:
    try:
        if path.suffix == ".json":
            return json.loads(text)
        return tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as error:
        kind = "JSON" if path.suffix == ".json" else "TOML"
        raise SpecError(f"The spec file {path}", f"it is not valid {kind}: {error}.") from error
