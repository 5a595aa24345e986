"""A real stack for the durable tests: restate-server and the service endpoint
(`services.stack.Stack` without the gateway), each a child process on free ports under a
temporary TEASPILL_HOME."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import psycopg
import pytest

from schemas.events import Event, TurnEnded
from services.ingress import Ingress
from services.projection.stores import open_store
from services.settings import Settings
from services.stack import Stack, isolated_settings
from services.stack.endpoint import Endpoint
from services.stack.restate import RestateServer

T = TypeVar("T")


@dataclass
class LiveStack:
    settings: Settings
    restate: RestateServer
    endpoint: Endpoint
    ingress: Ingress

    @property
    def home(self) -> Path:
        return self.settings.home

    def restart_endpoint(self, *, kill: bool) -> None:
        if kill:
            self.endpoint.kill()
        else:
            self.endpoint.stop()
        self.endpoint.start()

    def restart_restate(self, *, kill: bool) -> None:
        """Stop restate-server (SIGKILL, as a crash would, or SIGTERM) and start it again
        on the same data directory."""
        if kill:
            self.restate.kill()
        else:
            self.restate.stop()
        self.restate.start()

    def events(self, address: str) -> list[Event]:
        events: list[Event] = []
        while True:
            page = self.ingress.timeline(address, after_seq=len(events), limit=500)
            events.extend(page.events)
            if not page.events or len(events) >= page.last_seq:
                return events

    def shown(self, address: str) -> list[Event]:
        """The timeline as UIs read it, from the projection: it holds each event as soon
        as the step that made it returned, where Restate's copy (`events`) gets a running
        wake's events when the wake ends."""

        async def read() -> list[Event]:
            path = self.home / "projection.db"
            url = self.settings.projection_url
            if not url and not path.exists():
                return []
            store = await open_store(url, self.home, readonly=True)
            try:
                return await store.timeline(address, limit=100_000)
            except sqlite3.OperationalError as error:
                # The Projector has made the file and not yet committed its tables.
                if str(error).startswith("no such table"):
                    return []
                raise
            except psycopg.errors.UndefinedTable:
                return []  # the same, in PostgreSQL
            finally:
                await store.close()

        return asyncio.run(read())

    def wait_for_turn_end(self, address: str, turn: int, timeout: float = 120.0) -> TurnEnded:
        def ended() -> TurnEnded | None:
            for event in self.events(address):
                if event.turn == turn and isinstance(event.body, TurnEnded):
                    return event.body
            return None

        return eventually(ended, timeout, f"turn {turn} of {address} to end")


def eventually(probe: Callable[[], T | None], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value is not None:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def stack_settings(home: Path) -> Settings:
    return isolated_settings(
        home,
        tool_modules=("tests.fixtures.tools",),
        observer_modules=("tests.fixtures.observers",),
        model_modules=("tests.fixtures.models",),
        model_context=2048,
    )


@contextmanager
def live_stack(settings: Settings) -> Iterator[LiveStack]:
    """restate-server and the endpoint on `settings`, registered; stopped on the way out."""
    with Stack(settings, gateway=False) as stack, closing(Ingress(settings.ingress_url)) as ingress:
        yield LiveStack(settings, stack.restate, stack.endpoint, ingress)


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    with live_stack(stack_settings(tmp_path_factory.mktemp("home"))) as live:
        yield live


_counter = iter(range(1_000_000))


@pytest.fixture
def address(request: pytest.FixtureRequest) -> str:
    """A fresh agent address per test, so tests on the shared stack never meet. Its part
    is at most 39 characters (32 of the name, a dash, the counter), so a test may add a
    suffix of up to 9 (`-named`, `-child`) and stay within an address part's 48."""
    name = request.node.name.lower().replace("[", "-").replace("]", "")
    name = "".join(c if c.isalnum() or c in "-_" else "-" for c in name)[:32].strip("-_")
    return f"test.{name}-{next(_counter)}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Figures tests report with `record_property`, printed after the run (the suite
    writes no JUnit file for them to land in)."""
    reports = [
        report
        for outcome in ("passed", "failed")
        for report in terminalreporter.stats.get(outcome, [])
        if getattr(report, "user_properties", None) and report.when == "call"
    ]
    if not reports:
        return
    terminalreporter.section("figures reported by tests")
    for report in reports:
        for name, value in report.user_properties:
            terminalreporter.write_line(f"{report.nodeid}: {name} = {value}")
