"""The followers of the SSE benchmarks: an SSE reader that checks every frame, and a
probe that notes when each event first shows in the projection."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import msgspec

from bench import BenchError
from schemas.events import Event

PROBE_SECONDS = 0.005


def wall_clock() -> float:
    """The clock the agent's `ctx.time()` reads (`time.time()` in the endpoint)."""
    return time.time()  # noqa: TID251 - a benchmark, not durable code: wall time is the point


@dataclass(frozen=True)
class Arrival:
    event: Event
    at: float
    """Wall-clock seconds when the chunk that completed the event's frame arrived."""


class Follower:
    """One SSE connection from seq 1 (`Last-Event-ID: 0`): checks every recorded frame,
    and stops after seq `last`."""

    def __init__(self, address: str, last: int, live_after: int = 0) -> None:
        self.address = address
        self.last = last
        self.arrivals: list[Arrival] = []
        self.live = asyncio.Event()
        """Set once the replay reached seq `live_after`: what follows comes live."""
        self._live_after = live_after

    async def run(self, http: httpx.AsyncClient) -> None:
        headers = {"Last-Event-ID": "0"}
        async with http.stream("GET", f"/v1/agents/{self.address}/events", headers=headers) as r:
            if r.status_code != httpx.codes.OK:
                await r.aread()
                raise BenchError(f"{self.address}: the events stream answered {r.status_code}.")
            await self._read(r.aiter_bytes())

    async def _read(self, chunks: AsyncIterator[bytes]) -> None:
        """Frames as the gateway writes them (`field: value` lines, a blank line after
        each), parsed from the bytes: a line-by-line reader costs more CPU than the gateway
        spends sending, and would make the catch-up figure the client's."""
        rest = b""
        async for chunk in chunks:
            arrived = wall_clock()
            *frames, rest = (rest + chunk).split(b"\n\n")
            for frame in frames:
                self._take(frame, arrived)
                if len(self.arrivals) == self.last:
                    return
        raise BenchError(f"{self.address}: the stream ended after {len(self.arrivals)} events.")

    def _take(self, frame: bytes, arrived: float) -> None:
        fields: dict[bytes, bytes] = {}
        for line in frame.split(b"\n"):
            name, _, value = line.partition(b":")
            fields[name] = value.removeprefix(b" ")
        if b"id" not in fields:
            return  # a keepalive
        try:
            event = msgspec.json.decode(fields.get(b"data", b""), type=Event)
        except msgspec.DecodeError as error:
            raise BenchError(f"{self.address}: a frame's data is not an event: {error}") from None
        seq, tag = len(self.arrivals) + 1, str(event.body.__struct_config__.tag)
        if (event.seq, fields[b"id"], fields.get(b"event")) != (seq, b"%d" % seq, tag.encode()):
            frame_id, kind = fields[b"id"].decode(), fields.get(b"event", b"").decode()
            raise BenchError(
                f"{self.address}: a follower was sent seq {event.seq} ({tag}; frame id"
                f" {frame_id}, event {kind}) where seq {seq} was due."
            )
        self.arrivals.append(Arrival(event, arrived))
        if seq >= self._live_after:
            self.live.set()


class ProjectionProbe:
    """Notes when each event of some agents first shows in the projection (polling)."""

    def __init__(self, path: Path, addresses: list[str], after: int) -> None:
        self.seen: dict[tuple[str, int], float] = {}
        self._path = path
        self._cursors = dict.fromkeys(addresses, after)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="projection probe", daemon=True)

    @contextlib.contextmanager
    def running(self) -> Iterator[ProjectionProbe]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join()

    def _run(self) -> None:
        with contextlib.closing(sqlite3.connect(f"file:{self._path}?mode=ro", uri=True)) as db:
            while not self._stop.wait(PROBE_SECONDS):
                with contextlib.suppress(sqlite3.OperationalError):  # busy: poll again
                    self._poll(db)

    def _poll(self, db: sqlite3.Connection) -> None:
        """The projector's batches may commit out of order (seq 9 before 8), so the cursor
        moves only past seqs seen without a gap."""
        query = "select seq from events where agent = ? and seq > ?"
        for address, cursor in self._cursors.items():
            rows = db.execute(query, (address, cursor)).fetchall()
            now = wall_clock()
            for (seq,) in rows:
                self.seen.setdefault((address, seq), now)
            contiguous = cursor
            while (address, contiguous + 1) in self.seen:
                contiguous += 1
            self._cursors[address] = contiguous

    def at(self, event: Event) -> float:
        try:
            return self.seen[(event.agent, event.seq)]
        except KeyError:
            raise BenchError(f"the probe never saw {event.agent} seq {event.seq}.") from None
