"""No single tool call freezes the service or wedges a turn, on a real stack: a power tower
is refused at once while another agent's turn goes on at its usual pace; file tools
refuse what is not a regular file; a tool that never returns fails at its deadline."""

from __future__ import annotations

import os
import socket
import stat
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from schemas.events import Event, ModelMessage, ToolFinished, TurnEnded
from schemas.spec import AgentSpec, Limits
from schemas.workspace import WORKSPACE_TOOL_NAMES
from services.executor.scripted import script
from services.stack import isolated_settings
from tests.durable.conftest import LiveStack, live_stack

pytestmark = pytest.mark.durable

DEADLINE = 2.0
TOWER = "(((9**64)**64)**64)**64"
SPEC = AgentSpec(
    kind="limits",
    instructions="Follow the script.",
    model="script",
    tools=("calculator", "hang", "hang_post", *sorted(WORKSPACE_TOOL_NAMES)),
    limits=Limits(max_rounds=20),
)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    settings = isolated_settings(
        tmp_path_factory.mktemp("home"),
        tool_modules=("tests.fixtures.tools",),
        tool_deadline_seconds=DEADLINE,
    )
    with live_stack(settings) as live:
        yield live


def calls(*pairs: tuple[str, Mapping[str, object]]) -> str:
    """A script: each call in a round of its own, then a reply of every result."""
    lines = [{"calls": [{"name": name, "arguments": arguments}]} for name, arguments in pairs]
    return script(*lines, {"reply": "{results}"})


def timed_turn(stack: LiveStack, address: str, text: str) -> float:
    started = time.monotonic()
    result = stack.ingress.message(address, text, SPEC)
    assert result.status.last_outcome == "succeeded", result
    return time.monotonic() - started


def results(stack: LiveStack, address: str) -> list[ToolFinished]:
    return [e.body for e in stack.events(address) if isinstance(e.body, ToolFinished)]


def tool_seconds(events: list[Event]) -> list[float]:
    """How long each tool step took: from the model step that asked for it to its result
    (both times come from the steps themselves)."""
    asked = None
    took = []
    for event in events:
        if isinstance(event.body, ModelMessage):
            asked = event.at
        elif isinstance(event.body, ToolFinished) and asked is not None:
            took.append((event.at - asked).total_seconds())
    return took


def at_once(*turns: Callable[[], float]) -> list[float]:
    """Start the turns at the same moment, each on a thread; their durations."""
    ready = threading.Barrier(len(turns))
    took: list[float] = [0.0] * len(turns)

    def run(index: int) -> None:
        ready.wait()
        took[index] = turns[index]()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(turns))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return took


def test_a_power_tower_is_refused_at_once_and_slows_no_other_agent(
    stack: LiveStack, address: str, record_property: Callable[[str, object], None]
) -> None:
    tower = calls(*[("calculator", {"expression": TOWER})] * 3)
    other = "test.beside-" + address.rsplit("-", 1)[1]  # an address of its own, short
    timed_turn(stack, other, "warm up")
    timed_turn(stack, address, calls(("calculator", {"expression": "1+1"})))
    alone = [timed_turn(stack, other, "alone") for _ in range(5)]
    beside = []
    for _ in range(5):
        _, with_tower = at_once(
            lambda: timed_turn(stack, address, tower),
            lambda: timed_turn(stack, other, "beside the tower"),
        )
        beside.append(with_tower)

    record_property("median turn alone (s)", round(statistics.median(alone), 3))
    record_property("median turn beside the tower (s)", round(statistics.median(beside), 3))
    refusals = [r for r in results(stack, address) if TOWER in r.content]
    assert len(refusals) == 15
    for refusal in refusals:
        assert refusal.status == "error"
        assert "a power in it would have about 3,909 digits" in refusal.content
        assert "Error" not in refusal.content
    assert max(tool_seconds(stack.events(address))) < 1.0
    # Before the calculator measured its operands, one such call held the interpreter
    # for about 16 s, and a turn of another agent beside it took as long.
    # A tenth of a second on top absorbs the scheduler's noise on a busy machine.
    assert statistics.median(beside) < 3 * statistics.median(alone) + 0.1, (alone, beside)


def special_files(root: Path) -> str:
    """A named pipe, a loop of links, a socket and a device (or, where device nodes cannot
    be made, a link to one) in the workspace; what the device is refused as."""
    root.mkdir(parents=True, exist_ok=True)
    os.mkfifo(root / "pipe")
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    cwd = Path.cwd()
    os.chdir(root)  # a socket's path must be short: bind it relative to the workspace
    try:
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind("sock")
    finally:
        os.chdir(cwd)
    try:
        os.mknod(root / "zero", stat.S_IFCHR | 0o666, os.makedev(1, 5))
    except PermissionError:
        (root / "zero").symlink_to("/dev/zero")
        return "'zero' leads outside the workspace"
    return "'zero' is a character device, not a regular file"


def test_file_tools_refuse_pipes_loops_sockets_and_devices_and_the_turn_ends(
    stack: LiveStack, address: str
) -> None:
    root = stack.home / "workspaces" / address.split(".", maxsplit=1)[0] / address
    device = special_files(root)
    expected = [
        ("write_file", {"path": "pipe", "content": "x"}, "'pipe' is a named pipe (FIFO)"),
        ("read_file", {"path": "a"}, "'a' is a symbolic link that leads in a loop"),
        ("read_file", {"path": "sock"}, "'sock' is a socket, not a regular file"),
        ("read_file", {"path": "zero"}, device),
        ("list_files", {"path": "pipe"}, "'pipe' is a named pipe (FIFO), not a folder"),
    ]
    took = timed_turn(stack, address, calls(*[(name, args) for name, args, _ in expected]))

    found = results(stack, address)
    assert [(r.name, r.status) for r in found] == [(name, "error") for name, _, _ in expected]
    for result, (_, _, says) in zip(found, expected, strict=True):
        assert says in result.content
        assert str(stack.home) not in result.content
    ended = [e.body for e in stack.events(address) if isinstance(e.body, TurnEnded)]
    assert len(ended) == 1
    # Six rounds and five refusals; before, the write to the pipe never returned.
    assert took < 10, took


@pytest.mark.parametrize(
    ("tool", "status", "says"),
    [
        ("hang", "error", f"did not finish within its deadline of {DEADLINE:g} s"),
        ("hang_post", "unknown", "may or may not have taken effect. It was not run again."),
    ],
)
def test_a_tool_that_never_returns_fails_at_its_deadline_with_a_sentence(
    stack: LiveStack, address: str, tool: str, status: str, says: str
) -> None:
    took = timed_turn(stack, address, calls((tool, {})))

    (result,) = results(stack, address)
    assert (result.status, says in result.content) == (status, True), result
    assert DEADLINE <= took < DEADLINE + 10, took
