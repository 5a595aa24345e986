"""The CLI has words for every event on a timeline, and no command prints a traceback."""

from __future__ import annotations

import stat
import types
import typing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

import msgspec
import pytest

from schemas.events import BODY_TAGS, ApprovalRequested, Event, EventBody, ModelFallback
from schemas.questions import Question
from services.cli import health
from services.cli import main as cli_main
from services.cli.errors import BUG, guarded
from services.cli.render import _WORDS, describe

BODIES = get_args(EventBody)


SCALARS: dict[Any, Any] = {
    str: "text",
    bool: True,
    int: 3,
    float: 0.5,
    datetime: "2026-12-01T09:00:00Z",
}


def sample(kind: Any) -> Any:
    """A value of `kind` as JSON data: an optional's value, a Literal's first value, a
    sequence of one, a small mapping, a scalar, or a nested struct filled the same way."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        return sample(next(arg for arg in get_args(kind) if arg is not type(None)))
    if origin is typing.Literal:
        return get_args(kind)[0]
    if origin in (tuple, list):
        return [sample(get_args(kind)[0])]
    if origin is dict:
        value = get_args(kind)[1]
        nested = typing.get_origin(value) is dict or (
            isinstance(value, type) and issubclass(value, msgspec.Struct)
        )
        return {"path": sample(value) if nested else "a.txt"}
    if isinstance(kind, type) and issubclass(kind, msgspec.Struct):
        return msgspec.to_builtins(body_of(kind))
    return SCALARS.get(kind, {})


def body_of(kind: type[msgspec.Struct]) -> Any:
    hints = typing.get_type_hints(kind)
    fields = {}
    for name in kind.__struct_fields__:
        value = sample(hints[name])
        fields[name] = f"<{name}>" if value == "text" else value
    return msgspec.convert(fields, kind)


def event(body: Any) -> Event:
    return Event(
        agent="acme.helper", seq=7, turn=2, round=1, at=datetime(2026, 1, 2, tzinfo=UTC), body=body
    )


def test_the_renderer_has_its_own_words_for_every_event_type() -> None:
    assert set(_WORDS) == set(BODIES), "every body of the event union has a line"


@pytest.mark.parametrize("kind", BODIES, ids=lambda kind: BODY_TAGS[kind])
def test_every_event_type_renders_as_one_line(kind: type) -> None:
    line = describe(event(body_of(kind)))
    assert line.startswith("  #7 ")
    assert "\n" not in line
    assert len(line) > len("  #7    ") + 5
    assert line.split(maxsplit=1)[1] != BODY_TAGS[kind], "its own words, not its bare tag"


def test_a_fallback_names_both_models_and_why() -> None:
    body = ModelFallback(model="remote", next="smollm2", reason="it did not answer")
    line = describe(event(body))
    assert "remote" in line
    assert "smollm2" in line
    assert "it did not answer" in line


def test_a_question_the_model_asks_shows_its_choices() -> None:
    choice = {"type": "string", "enum": ["red", "blue"]}
    form = {"type": "object", "properties": {"answer": choice}, "required": ["answer"]}
    body = ApprovalRequested(
        "t1r1-call_0", "call_0", "ask_user", {"question": "Which colour?"},
        questions={"question": Question("Which colour?", form)},
    )  # fmt: skip
    line = describe(Event("acme.a", 3, 1, 1, datetime(2026, 12, 1, tzinfo=UTC), body))
    assert line.endswith(
        "asks the person t1r1-call_0; asks question: Which colour? "
        "[answer string (required; one of red, blue)]"
    )


def test_a_body_this_version_does_not_know_is_shown_by_its_tag() -> None:
    class Future(msgspec.Struct, frozen=True, tag="future_thing"):
        pass

    line = describe(msgspec.structs.replace(event(body_of(BODIES[0])), body=Future()))
    assert line == "  #7    future_thing"


def test_an_unexpected_error_is_a_sentence_and_its_details_go_to_the_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TEASPILL_HOME", str(tmp_path))

    def broken() -> int:
        raise KeyError(ModelFallback)

    assert guarded(broken) == BUG
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("teaspill: this command failed on something teaspill did not expect")
    assert "Traceback" not in err
    assert "KeyError" not in err
    log = tmp_path / "logs" / "cli.log"
    assert str(log) in err
    assert "KeyError" in log.read_text()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600, "a traceback is the user's alone"


def test_a_command_that_breaks_inside_prints_no_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TEASPILL_HOME", str(tmp_path))

    def broken(*_: object) -> int:
        raise ValueError("an internal detail")

    monkeypatch.setattr(health, "status", broken)
    assert cli_main.main(["status"]) == BUG
    _, err = capsys.readouterr()
    assert "Traceback" not in err
    assert "an internal detail" not in err
