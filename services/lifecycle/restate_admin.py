"""What an erasure asks of restate-server's admin API: which objects hold state and which
invocations target them (its SQL), killing and purging invocations, and clearing an
object's state (`POST /services/{service}/state` with no keys).

Only names this module checked reach the SQL: service names and object keys are matched
against their own shapes first (addresses, hook ids, digests), so nothing a user wrote is
quoted into a query.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import httpx

SAFE = re.compile(r"^[A-Za-z0-9_.:-]{1,200}\Z")
IN_FLIGHT_WAIT = 30.0
"""Seconds to wait for killed invocations to end, and cleared state to be gone."""


class AdminError(RuntimeError):
    """The admin API refused or could not be reached; the message is a sentence."""


@dataclass(frozen=True)
class Target:
    service: str
    key: str


class RestateAdminApi:
    def __init__(self, url: str, *, timeout: float = 30.0) -> None:
        self._http = httpx.Client(base_url=url, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def query(self, sql: str) -> list[dict[str, Any]]:
        answer = self._http.post(
            "/query", json={"query": sql}, headers={"accept": "application/json"}
        )
        if answer.status_code != httpx.codes.OK:
            raise AdminError(f"restate-server's SQL answered {answer.status_code}: {answer.text}")
        rows: list[dict[str, Any]] = answer.json()["rows"]
        return rows

    def keys_with_prefix(self, service: str, prefix: str, *, invoked: bool = False) -> set[str]:
        """Keys of `service` that hold state (or, `invoked`, have an invocation Restate
        still knows of) and are `prefix` or start with `prefix.`."""
        keys = self.keys_starting(service, prefix, invoked=invoked)
        return {key for key in keys if _under(key, prefix)}

    def keys_starting(self, service: str, start: str, *, invoked: bool = False) -> set[str]:
        """Keys of `service` that start with `start` and hold state, or (`invoked`) have
        an invocation Restate still knows of: a finished one keeps its input, its result
        or its journal after the object's state is gone."""
        _check(service)
        _check(start)
        rows = self.query(
            f"select distinct service_key from state where service_name = '{service}'"  # noqa: S608
            f" and starts_with(service_key, '{start}')"
        )
        keys = {str(r["service_key"]) for r in rows}
        if invoked:
            rows = self.query(
                "select distinct target_service_key from sys_invocation"  # noqa: S608
                f" where target_service_name = '{service}'"
                f" and starts_with(target_service_key, '{start}')"
            )
            keys |= {str(r["target_service_key"]) for r in rows}
        return keys

    def keys_owned(self, service: str, name: str, prefix: str) -> set[str]:
        """Keys of `service` whose state value `name` is the JSON string `prefix` or one
        starting with `prefix.` (an agent's address, or one under it)."""
        _check(service)
        _check(name)
        _check(prefix)
        rows = self.query(
            "select distinct service_key from state"  # noqa: S608
            f" where service_name = '{service}' and key = '{name}'"
            f""" and (value_utf8 = '"{prefix}"' or starts_with(value_utf8, '"{prefix}.'))"""
        )
        return {str(r["service_key"]) for r in rows}

    def invocations(self, targets: Iterable[Target], *, completed: bool) -> list[str]:
        """Ids of the invocations of the targets, finished or not."""
        wanted = {(t.service, t.key) for t in targets}
        found: list[tuple[int, str]] = []
        for service in sorted({s for s, _ in wanted}):
            _check(service)
            rows = self.query(
                "select id, target_service_key, status from sys_invocation"  # noqa: S608
                f" where target_service_name = '{service}'"
            )
            for row in rows:
                done = row["status"] == "completed"
                if (service, str(row["target_service_key"])) in wanted and done == completed:
                    found.append((row["status"] == "running", str(row["id"])))
        # The running ones last: a killed running wake would let a queued one start.
        return [invocation for _, invocation in sorted(found)]

    def kill(self, invocation: str) -> None:
        self._patch(f"/invocations/{invocation}/kill")

    def purge(self, invocation: str) -> None:
        self._patch(f"/invocations/{invocation}/purge")

    def stop_all(self, targets: list[Target]) -> int:
        """Kill every invocation of the targets not finished, until none is left."""
        killed: set[str] = set()
        deadline = time.monotonic() + IN_FLIGHT_WAIT
        while pending := self.invocations(targets, completed=False):
            if time.monotonic() > deadline:
                raise AdminError(f"{len(pending)} invocations did not end after being killed")
            for invocation in pending:
                self.kill(invocation)
                killed.add(invocation)
            time.sleep(0.2)
        return len(killed)

    def purge_all(self, targets: list[Target]) -> int:
        finished = self.invocations(targets, completed=True)
        for invocation in finished:
            self.purge(invocation)
        return len(finished)

    def clear(self, targets: list[Target]) -> int:
        """Clear the state of each target that has any; return once none holds any."""
        held = self._holding(targets)
        for target in held:
            answer = self._http.post(
                f"/services/{target.service}/state",
                json={"object_key": target.key, "new_state": {}},
            )
            if answer.status_code >= httpx.codes.BAD_REQUEST:
                raise AdminError(
                    f"restate-server did not clear {target.service}/{target.key}: {answer.text}"
                )
        deadline = time.monotonic() + IN_FLIGHT_WAIT
        while self._holding(targets):
            if time.monotonic() > deadline:
                raise AdminError("restate-server did not clear the state in time")
            time.sleep(0.1)
        return len(held)

    def _holding(self, targets: list[Target]) -> list[Target]:
        wanted = set(targets)
        found: set[Target] = set()
        for service in sorted({t.service for t in targets}):
            _check(service)
            rows = self.query(
                f"select distinct service_key from state where service_name = '{service}'"  # noqa: S608
            )
            found |= {Target(service, str(r["service_key"])) for r in rows} & wanted
        return sorted(found, key=lambda t: (t.service, t.key))

    def _patch(self, path: str) -> None:
        answer = self._http.patch(path)
        # 404: gone already; 409: finished already (kill) or not yet (purge, retried later).
        if answer.status_code >= httpx.codes.BAD_REQUEST and answer.status_code not in (404, 409):
            raise AdminError(
                f"restate-server answered {answer.status_code} to {path}: {answer.text}"
            )


def _under(key: str, prefix: str) -> bool:
    return key == prefix or key.startswith(f"{prefix}.")


def _check(value: str) -> None:
    if not SAFE.match(value):
        raise AdminError(f"{value!r} is not a name restate-server's SQL is asked about")
