"""Waiting for the projector to catch up, and checking its copy of each timeline.

An agent's wake writes its events to `$TEASPILL_HOME/projection.db` before it returns,
unless the projection could not be written and they went to the `Projector` instead,
which writes them later. A round is only finished for a UI once it is projected; the
benchmarks wait for that, time it, and check the copy like the original.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path

from bench import BenchError
from services.projection.store import ProjectionStore

POLL_SECONDS = 0.02
PAGE = 500


def projection_path(home: Path) -> Path:
    """Where the endpoint's projector writes (see `services/app.py`)."""
    return home / "projection.db"


def wait_projected(path: Path, expected: Mapping[str, int], timeout: float) -> float:
    """Wait until every agent's projected timeline reaches its expected last seq; return
    that moment (`time.perf_counter`)."""
    deadline = time.perf_counter() + timeout
    while not (path.exists() and asyncio.run(_caught_up(path, expected))):
        if time.perf_counter() > deadline:
            raise BenchError(f"the projection did not catch up within {timeout:g} s.")
        time.sleep(POLL_SECONDS)
    return time.perf_counter()


def check_projected(path: Path, expected: Mapping[str, int]) -> None:
    """Raise `BenchError` unless each agent's projected timeline is seq 1..n."""
    asyncio.run(_check(path, expected))


async def _caught_up(path: Path, expected: Mapping[str, int]) -> bool:
    try:
        async with await ProjectionStore.open(path, readonly=True) as store:
            for address, last_seq in expected.items():
                row = await store.agent(address)
                if row is None or row.last_seq < last_seq:
                    return False
    except sqlite3.OperationalError:
        return False  # not created yet, or mid-migration
    return True


async def _check(path: Path, expected: Mapping[str, int]) -> None:
    async with await ProjectionStore.open(path, readonly=True) as store:
        for address, last_seq in expected.items():
            seqs: list[int] = []
            while page := await store.timeline(address, seqs[-1] if seqs else 0, PAGE):
                seqs.extend(event.seq for event in page)
            if seqs != list(range(1, last_seq + 1)):
                raise BenchError(
                    f"{address}: the projection holds {len(seqs)} events, not seq 1..{last_seq}."
                )
