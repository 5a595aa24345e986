"""What Restate journaled: invocations and their journal entries, read through the admin
API's SQL (`POST /query`, the `sys_invocation` and `sys_journal` tables).

restate-server keeps a finished invocation's journal for a day, unless its service or
handler keeps none (`services.durable.NO_JOURNAL`): call `retain_journals` for each
service before the invocations whose journals you want to read. Benchmarks and tests
use this to count what a round costs (entries, bytes, invocations); nothing in the running
system depends on it.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx
import msgspec

RETENTION = "1h"
FINISHED = "completed"
"""`sys_invocation.status` of an invocation that has finished."""
_INVOCATION_ID = re.compile(r"inv_[0-9A-Za-z]+")
_SERVICE_NAME = re.compile(r"[A-Za-z_][0-9A-Za-z_.-]*")


class JournalError(RuntimeError):
    """The admin API could not answer; the message says what it answered or why not."""


class JournalEntry(msgspec.Struct, frozen=True):
    """One row of `sys_journal`: a command (a run, a call, a state write, ...) or a
    notification (a run's result, a call's completion, ...)."""

    index: int
    entry_type: str
    """As Restate names it, e.g. `Command: Run` or `Notification: Run`."""
    name: str = ""
    raw_length: int = 0
    """Bytes of the encoded entry."""


class Invocation(msgspec.Struct, frozen=True):
    """One row of `sys_invocation`."""

    id: str
    target_service_name: str
    target_handler_name: str
    status: str
    target_service_key: str = ""
    invoked_by_id: str = ""


@dataclass(frozen=True)
class Tally:
    entries: int
    bytes: int


@dataclass(frozen=True)
class Journal:
    """The journal of one invocation, in index order."""

    invocation: str
    entries: tuple[JournalEntry, ...]

    @property
    def size(self) -> Tally:
        return Tally(len(self.entries), sum(e.raw_length for e in self.entries))

    def by_type(self) -> dict[str, Tally]:
        """Entries and bytes per entry type, e.g. {"Command: Run": Tally(3, 120), ...}."""
        return tally_by_type(self.entries)


def tally_by_type(entries: Iterable[JournalEntry]) -> dict[str, Tally]:
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    for entry in entries:
        counts[entry.entry_type] += 1
        sizes[entry.entry_type] += entry.raw_length
    return {kind: Tally(counts[kind], sizes[kind]) for kind in sorted(counts)}


class RestateAdmin:
    """A small client for what Restate's admin API says about invocations and journals."""

    def __init__(
        self,
        admin_url: str,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._client = httpx.Client(base_url=admin_url, transport=transport, timeout=timeout)

    def __enter__(self) -> RestateAdmin:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    def services(self) -> list[str]:
        """The names of every registered service."""
        answer = self._send("GET", "/services")
        return sorted(str(service["name"]) for service in answer.json().get("services", []))

    def retain_journals(self, services: Iterable[str], retention: str = RETENTION) -> None:
        """Keep the journals of the services' invocations that finish from now on."""
        for service in services:
            _check(_SERVICE_NAME, service, "service name")
            self._send("PATCH", f"/services/{service}", json={"journal_retention": retention})

    def query(self, sql: str) -> list[dict[str, Any]]:
        """The rows of one SQL query, each a column → value mapping."""
        answer = self._send("POST", "/query", json={"query": sql})
        try:
            rows = answer.json()["rows"]
        except (ValueError, KeyError, TypeError) as error:
            raise JournalError(
                f"the admin API answered a query with {answer.text[:200]!r}."
            ) from error
        if not isinstance(rows, list):
            raise JournalError(f"the admin API answered a query with {answer.text[:200]!r}.")
        return rows

    def invocations(self, ids: Iterable[str] | None = None) -> list[Invocation]:
        """Invocations Restate still knows of (running, or finished and retained); only
        `ids` when given."""
        columns = ", ".join(Invocation.__struct_fields__)
        where = "" if ids is None else f" WHERE id IN ({_id_list(ids)})"
        rows = self.query(f"SELECT {columns} FROM sys_invocation{where} ORDER BY id")  # noqa: S608
        return [msgspec.convert(_no_nulls(row), Invocation) for row in rows]

    def finished_since(
        self, before: Iterable[str], timeout: float = 60.0, poll: float = 0.1
    ) -> list[Invocation]:
        """The invocations Restate made since `before` (the ids it knew then), once every
        one of them has finished: what a turn caused, its calls and sends included."""
        known = set(before)
        deadline = time.monotonic() + timeout
        while True:
            made = [i for i in self.invocations() if i.id not in known]
            unfinished = sorted(
                {f"{i.target_service_name} ({i.status})" for i in made if i.status != FINISHED}
            )
            if not unfinished:
                return made
            if time.monotonic() > deadline:
                raise JournalError(
                    f"invocations still unfinished after {timeout:g} s: {', '.join(unfinished)}."
                )
            time.sleep(poll)

    def journal(self, invocation: str) -> Journal:
        """One invocation's journal; raises `JournalError` when Restate holds none."""
        journals = self.journals([invocation])
        if not journals[0].entries:
            raise JournalError(
                f"Restate holds no journal for {invocation}: is it a real invocation of a"
                " service that keeps journals (retain_journals before it ran)?"
            )
        return journals[0]

    def journals(self, invocations: Sequence[str]) -> list[Journal]:
        """The journals of several invocations in one query, in the order asked; an
        invocation Restate holds no journal for has no entries."""
        if not invocations:
            return []
        rows = self.query(
            "SELECT id, index, entry_type, name, raw_length FROM sys_journal"  # noqa: S608
            f" WHERE id IN ({_id_list(invocations)}) ORDER BY id, index"
        )
        found: dict[str, list[JournalEntry]] = {}
        for row in rows:
            entry = msgspec.convert(_no_nulls(row), JournalEntry)
            found.setdefault(str(row["id"]), []).append(entry)
        return [Journal(inv, tuple(found.get(inv, ()))) for inv in invocations]

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            answer = self._client.request(
                method, path, headers={"accept": "application/json"}, **kwargs
            )
        except httpx.HTTPError as error:
            raise JournalError(
                f"Restate's admin API at {self._client.base_url} did not answer {method} {path}"
                f" ({error!r})."
            ) from error
        if not answer.is_success:
            raise JournalError(
                f"Restate's admin API answered {method} {path} with {answer.status_code}:"
                f" {answer.text.strip()[:300]}"
            )
        return answer


def _check(pattern: re.Pattern[str], value: str, what: str) -> None:
    """Values are put into SQL and paths: only the characters Restate uses are allowed."""
    if not pattern.fullmatch(value):
        raise ValueError(f"{value!r} is not a Restate {what}.")


def _id_list(ids: Iterable[str]) -> str:
    listed = list(ids)
    for invocation in listed:
        _check(_INVOCATION_ID, invocation, "invocation id")
    return ", ".join(f"'{invocation}'" for invocation in listed) or "''"


def _no_nulls(row: dict[str, Any]) -> dict[str, Any]:
    """SQL nulls become the fields' defaults."""
    return {key: value for key, value in row.items() if value is not None}
