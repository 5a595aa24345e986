"""docs/http.md mirrors the gateway: every route is there, and its JSON examples decode
into the types the gateway answers with."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
from ag_ui.core import RunAgentInput
from pydantic import BaseModel

from schemas.events import TimelinePage
from schemas.live import LiveBatch
from schemas.projection import ProjectedBatch
from schemas.schedule import Schedule, ScheduleList
from schemas.spec import AgentSpec
from schemas.tenant import PublishedSpec, SpecVersions
from services.gateway.app import create_app
from services.gateway.models import (
    AgentOut,
    AgentPage,
    ApprovalAccepted,
    ApprovalIn,
    DeliveryAccepted,
    DeploymentOut,
    ErrorOut,
    HealthDown,
    HookCreated,
    HookIn,
    HookOut,
    HooksOut,
    KeyCreated,
    KeyIn,
    KeyOut,
    KeysOut,
    LiveAccepted,
    MeOut,
    MessageAccepted,
    MessageIn,
    PageClaimed,
    PageClaimIn,
    PageResultAccepted,
    PageResultIn,
    ProjectedAccepted,
    ScheduleIn,
    StopAccepted,
)
from services.settings import Settings

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "http.md").read_text()
EXAMPLES = re.findall(r"```json\n(.*?)\n```", PAGE, flags=re.S)


def routes() -> list[str]:
    schema = create_app(Settings()).openapi()
    return sorted(f"{m.upper()} {p}" for p, ops in schema["paths"].items() for m in ops)


@pytest.mark.parametrize("route", routes())
def test_every_route_has_a_section_and_a_scope(route: str) -> None:
    assert f"### `{route}`" in PAGE
    needs = "read|write|admin|publishable|none|live token|notify token|metrics token"
    assert re.search(rf"\| `{re.escape(route)}` \| ({needs}) \|", PAGE)


def decode(example: dict[str, Any]) -> object:
    """The type an example is an instance of, by its shape."""
    raw = json.dumps(example).encode()
    if set(example) == {"agents"} and all(
        set(a) == {"agent", "last_seq"} for a in example["agents"]
    ):
        return msgspec.json.decode(raw, type=ProjectedBatch)
    shapes: list[tuple[str, Any]] = [
        ("threadId", RunAgentInput),
        ("webhook_id", DeliveryAccepted),
        ("info", KeyCreated),
        ("keys", KeysOut),
        ("key_id", MeOut),
        ("checked", DeploymentOut),
        ("revoked_at", KeyOut),
        ("scope", KeyIn),
        ("parts", HealthDown),
        ("error", ErrorOut),
        ("events", TimelinePage),
        ("versions", SpecVersions),
        ("fresh", LiveAccepted),
        ("followed", ProjectedAccepted),
        ("deltas", LiveBatch),
        ("agents", AgentPage),
        ("dropped", PageResultAccepted),
        ("call_id", PageClaimed),
        ("content", PageResultIn),
        ("page", PageClaimIn),
        ("request_id", ApprovalAccepted),
        ("approve", ApprovalIn),
        ("message", StopAccepted),
        ("invocation_id", MessageAccepted),
        ("last_activity", AgentOut),
        ("published_at", PublishedSpec),
        ("secret", HookCreated),
        ("url", HookOut),
        ("hooks", HooksOut),
        ("template", HookIn),
        ("next_at", Schedule),
        ("schedules", ScheduleList),
        ("while_busy", ScheduleIn),
        ("text", MessageIn),
        ("instructions", AgentSpec),
    ]
    for key, type_ in shapes:
        if key not in example:
            continue
        if isinstance(type_, type) and issubclass(type_, BaseModel):
            return type_.model_validate_json(raw)
        return msgspec.json.decode(raw, type=type_)
    raise AssertionError(f"an example of no known shape: {example}")


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_json_example_is_valid(example: str) -> None:
    parsed = json.loads(example)
    assert isinstance(parsed, dict)
    decode(parsed)


def test_the_examples_cover_the_answers() -> None:
    decoded = {type(decode(json.loads(e))).__name__ for e in EXAMPLES}
    assert {"ErrorOut", "TimelinePage", "SpecVersions", "LiveBatch", "AgentPage"} <= decoded
    assert {"MessageAccepted", "AgentOut", "PublishedSpec", "MessageIn", "AgentSpec"} <= decoded
    assert {"HealthDown", "LiveAccepted"} <= decoded
    assert {"ApprovalIn", "ApprovalAccepted", "StopAccepted"} <= decoded
    assert {"MeOut", "KeysOut", "KeyIn", "KeyCreated", "RunAgentInput"} <= decoded
    assert {"ScheduleIn", "Schedule", "ScheduleList"} <= decoded
    assert {"HookIn", "HookCreated", "HookOut", "HooksOut", "DeliveryAccepted"} <= decoded


REQUESTS = (
    "MessageIn",
    "ApprovalIn",
    "AgentSpec",
    "KeyIn",
    "RunAgentInput",
    "ScheduleIn",
    "HookIn",
    "PageClaimIn",
    "PageResultIn",
)
"""Bodies a client sends may leave out optional fields; answers show every field."""


def as_json(value: object) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return msgspec.to_builtins(value)


def missing(shown: Any, full: Any, path: str = "") -> list[str]:
    """The fields `full` has that `shown` leaves out, by path."""
    if isinstance(full, dict) and isinstance(shown, dict):
        found = [f"{path}.{key}" for key in full if key not in shown]
        for key in full.keys() & shown.keys():
            found += missing(shown[key], full[key], f"{path}.{key}")
        return found
    if isinstance(full, list) and isinstance(shown, list) and full and shown:
        return missing(shown[0], full[0], f"{path}[0]")
    return []


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_answer_example_shows_every_field_the_api_returns(example: str) -> None:
    parsed = json.loads(example)
    value = decode(parsed)
    if type(value).__name__ not in REQUESTS:
        assert missing(parsed, as_json(value)) == []
