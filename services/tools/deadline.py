"""A deadline on every tool call, as a wrapper around the tool.

A tool's call runs on a thread of its own; the step waits for it at most `seconds`. Past
that the step answers with a sentence and returns, so a tool that never returns fails at
its deadline instead of holding the step until Restate aborts and retries it. Python
cannot stop a thread: an abandoned call runs on by itself, and whatever it returns is
dropped. A side-effecting call that passed its deadline may or may not have taken effect,
so it is reported as an unknown outcome, never run again. While `MAX_OVERDUE` calls of one
tool are still running past their deadline, further calls of it are refused, so a tool
that always hangs cannot pile up threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from schemas.chat import ToolDefinition
from services.tools.base import Tool, ToolContext, ToolError

DEFAULT_SECONDS = 60.0
"""How long a tool call may take unless the operator sets `TEASPILL_TOOL_DEADLINE_SECONDS`."""
MAX_OVERDUE = 4

T = TypeVar("T")


class OutcomeUnknownError(ToolError):
    """A side-effecting call whose outcome nobody knows; the registry records it as
    `unknown`."""


def overdue(name: str, seconds: float, *, effects: bool) -> ToolError:
    if effects:
        return OutcomeUnknownError(
            f"The tool {name} did not finish within its deadline of {seconds:g} s, so it may "
            "or may not have taken effect. It was not run again."
        )
    return ToolError(
        f"The tool {name} did not finish within its deadline of {seconds:g} s and was given "
        "up; it returned nothing."
    )


class _Overdue:
    """How many calls of one tool are still running past their deadline."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def give_up(self, call: _Call) -> None:
        with self._lock:
            if not call.finished:
                call.given_up = True
                self.count += 1

    def finish(self, call: _Call) -> None:
        with self._lock:
            call.finished = True
            if call.given_up:
                self.count -= 1


@dataclass
class _Call:
    finished: bool = False
    given_up: bool = False


@dataclass(frozen=True)
class WithDeadline:
    """`tool`, failing with a sentence when a call takes longer than `seconds`."""

    tool: Tool
    seconds: float
    _overdue: _Overdue = field(default_factory=_Overdue, repr=False, compare=False)

    @property
    def definition(self) -> ToolDefinition:
        return self.tool.definition

    @property
    def effects(self) -> bool:
        return self.tool.effects

    def call(self, arguments: dict[str, Any], context: ToolContext) -> str:
        name = self.definition.name
        if self._overdue.count >= MAX_OVERDUE:
            raise ToolError(
                f"The tool {name} is refused for now: {self._overdue.count} of its earlier "
                f"calls passed their deadline of {self.seconds:g} s and are still running."
            )
        done: Future[str] = Future()
        state = _Call()

        def run() -> None:
            try:
                done.set_result(self.tool.call(arguments, context))
            except BaseException as error:  # noqa: BLE001 - handed to the waiting step
                done.set_exception(error)
            finally:
                self._overdue.finish(state)

        threading.Thread(target=run, name=f"tool {name}", daemon=True).start()
        # Not `done.result(timeout)`: a TimeoutError the tool raised itself is its own
        # failure, not the deadline.
        if not wait((done,), timeout=self.seconds).done:
            self._overdue.give_up(state)
            raise overdue(name, self.seconds, effects=self.effects)
        return done.result()


class DeadlinePassedError(Exception):
    """`within` gave up waiting."""


async def within(seconds: float, function: Callable[[], T]) -> T:
    """`function()` run on a daemon thread of its own, awaited at most `seconds` (then
    `DeadlinePassedError`). Not `asyncio.to_thread`: a call stuck in its pool would hold
    up the event loop's shutdown, which waits for every pool thread."""
    loop = asyncio.get_running_loop()
    result: asyncio.Future[T] = loop.create_future()

    def settle(value: T | None, error: BaseException | None) -> None:
        if result.done():
            return
        if error is not None:
            result.set_exception(error)
        else:
            result.set_result(cast(T, value))

    def run() -> None:
        value: T | None = None
        error: BaseException | None = None
        try:
            value = function()
        except BaseException as raised:  # noqa: BLE001 - handed to the awaiting task
            error = raised
        with contextlib.suppress(RuntimeError):  # the loop closed while it ran
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=run, name="tool call", daemon=True).start()
    done, _ = await asyncio.wait((result,), timeout=seconds)
    if not done:
        result.cancel()
        raise DeadlinePassedError
    return result.result()
