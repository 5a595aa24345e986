"""Suite-wide: a real PostgreSQL cluster for the tests of the PostgreSQL projection store,
started on first use and stopped when the session ends (`tests/fixtures/postgres.py`).
And teardown: a workspaces' image a test's stack left mounted is unmounted when
the session ends, and named in the summary, so pytest can remove its temporary folders
and a leak is seen rather than found later as a folder that cannot be deleted."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from services.workspace.volumes import mounted_under
from tests.fixtures.postgres import Cluster, cluster


@pytest.fixture(scope="session")
def postgres() -> Iterator[Cluster]:
    with cluster() as server:
        yield server


def pytest_sessionfinish(session: pytest.Session) -> None:
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None:
        return
    left = mounted_under(factory.getbasetemp())
    for mount in left:
        subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)
    session.config.stash[_LEFT] = [str(mount) for mount in left]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    left = terminalreporter.config.stash.get(_LEFT, [])
    if left:
        terminalreporter.write_line(
            f"{len(left)} workspaces' image(s) were left mounted by a stack and unmounted "
            "at the end of the session: " + ", ".join(left),
            yellow=True,
        )


_LEFT = pytest.StashKey[list[str]]()
