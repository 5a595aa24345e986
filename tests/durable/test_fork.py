"""Forks on a real stack: a fork at seq N holds the source's first N events and its own
workspace copy, answers on its own with the history up to N, and the source goes on."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from schemas.events import AgentForked, Event, ModelMessage, TurnEnded, TurnStarted
from schemas.lifecycle import ForkRequest
from schemas.sandbox import WorkspaceSettings
from schemas.spec import AgentSpec
from services.contracts import ARCHIVE, FORK, Empty
from services.executor.scripted import script
from services.ingress import IngressError
from tests.durable.conftest import LiveStack

pytestmark = pytest.mark.durable

SPEC = AgentSpec(
    kind="forker",
    instructions="Follow the script.",
    model="script",
    tools=("calculator", "write_file"),
    workspace=WorkspaceSettings(quota_mb=16),
)
FIRST = script(
    {"calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "v1"}}]},
    {"reply": "Wrote {results}"},
)
SECOND = "tell me more about the notes"


def _without_agent(events: list[Event]) -> list[bytes]:
    return [msgspec.json.encode(msgspec.structs.replace(e, agent="")) for e in events]


def _first_prompt(events: list[Event], turn: int) -> int:
    return next(
        e.body.usage.prompt_tokens
        for e in events
        if e.turn == turn and isinstance(e.body, ModelMessage)
    )


def _workspace(stack: LiveStack, address: str) -> Path:
    return stack.home / "workspaces" / "test" / address


def test_a_fork_holds_the_first_n_events_answers_on_its_own_and_the_source_goes_on(
    stack: LiveStack, address: str
) -> None:
    stack.ingress.message(address, FIRST, SPEC)
    stack.ingress.message(address, SECOND)
    source = stack.events(address)
    turn_two = next(e.seq for e in source if e.turn == 2 and isinstance(e.body, TurnStarted))
    cut = turn_two + 1  # inside turn 2: its model message, before it ended
    fork = f"{address}.fork"

    status = stack.ingress.call(FORK, ForkRequest(address, cut, by="k1 (ops)"), fork)

    assert (status.state, status.turn, status.last_seq) == ("idle", 2, cut + 1)
    forked = stack.events(fork)
    assert _without_agent(forked[:cut]) == _without_agent(source[:cut])
    assert {e.agent for e in forked} == {fork}
    assert forked[cut].body == AgentForked(address, cut, "k1 (ops)")
    assert (_workspace(stack, fork) / "notes.txt").read_text() == "v1"
    assert [e.seq for e in stack.shown(fork)] == list(range(1, cut + 2))

    # Its history is turn 1 alone: the same message gets the prompt turn 2 had.
    reply = stack.ingress.message(fork, SECOND)
    assert (reply.reply, reply.status.turn) == (f"You said: {SECOND}", 3)
    after = stack.events(fork)
    assert _first_prompt(after, 3) == _first_prompt(source, 2)
    assert isinstance(after[-1].body, TurnEnded)

    # The source goes on unchanged, and the fork's copy of the workspace is its own.
    again = script(
        {"calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "v2"}}]},
        {"reply": "done"},
    )
    stack.ingress.message(address, again)
    went_on = stack.events(address)
    assert _without_agent(went_on[: len(source)]) == _without_agent(source)
    assert went_on[-1].turn == 3
    assert _first_prompt(went_on, 3) > _first_prompt(after, 3)
    assert (_workspace(stack, fork) / "notes.txt").read_text() == "v1"
    assert stack.events(fork) == after


def test_a_fork_is_refused_onto_an_agent_past_the_timeline_or_across_tenants(
    stack: LiveStack, address: str
) -> None:
    stack.ingress.message(address, "hello", SPEC)
    last = len(stack.events(address))
    cases = [
        (address, ForkRequest(address, 1), 409),
        (f"{address}.far", ForkRequest(address, last + 1), 422),
        (f"other.{address.split('.', 1)[1]}", ForkRequest(address, 1), 403),
        (f"{address}.none", ForkRequest(f"{address}.missing", 1), 404),
    ]
    for target, request, expected in cases:
        with pytest.raises(IngressError) as refused:
            stack.ingress.call(FORK, request, target)
        assert refused.value.status == expected, refused.value.message
    stack.ingress.call(FORK, ForkRequest(address, last), f"{address}.ok")
    with pytest.raises(IngressError) as twice:
        stack.ingress.call(FORK, ForkRequest(address, last), f"{address}.ok")
    assert twice.value.status == 409
    assert "exists already" in twice.value.message


def test_a_fork_is_refused_onto_an_archived_agent_or_a_workspace_left_behind(
    stack: LiveStack, address: str
) -> None:
    """An archived agent has no Restate state, but its workspace stays, and may hold a
    link its commands left (here to another tenant's workspace): a fork onto it, or onto
    any address that has a workspace, is refused before anything is copied or counted."""
    victim = stack.home / "workspaces" / "bravo" / "bravo.agent"
    victim.mkdir(parents=True)
    (victim / "notes.txt").write_text("bravo's own")
    source = script(
        {"calls": [{"name": "write_file", "arguments": {"path": "d/notes.txt", "content": "x"}}]},
        {"reply": "done"},
    )
    stack.ingress.message(address, source, SPEC)
    archived = f"{address}.archived"
    stack.ingress.message(archived, FIRST, SPEC)
    (_workspace(stack, archived) / "d").symlink_to("../../bravo/bravo.agent")
    stack.ingress.call(ARCHIVE, Empty(), archived)
    left = f"{address}.left"
    _workspace(stack, left).mkdir()
    last = len(stack.events(address))

    for target, sentence in ((archived, "is an archived agent"), (left, "has a workspace")):
        with pytest.raises(IngressError) as refused:
            stack.ingress.call(FORK, ForkRequest(address, last), target)
        assert refused.value.status == 409, refused.value.message
        assert sentence in refused.value.message

    assert _names(victim) == ["notes.txt"]
    assert (victim / "notes.txt").read_text() == "bravo's own"
    assert _names(_workspace(stack, archived)) == ["d", "notes.txt"]
    assert _names(_workspace(stack, left)) == []
    assert stack.ingress.message(archived, "back?").reply == "You said: back?"


def _names(folder: Path) -> list[str]:
    return sorted(entry.name for entry in folder.iterdir())
