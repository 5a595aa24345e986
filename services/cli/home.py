"""Where a stack started by `teaspill up` listens, kept in its home.

`up` writes `$TEASPILL_HOME/stack.json` (readable by the user only): the process group of
each part and the addresses and ports it listens on. Every command reads it, so a shell
that only shares the home (no port variables) reaches the same stack; a variable that is
set still wins, for a user who points the CLI elsewhere on purpose.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from services.settings import Settings
from services.stack.gateway import local_url

RUN_FILE = "stack.json"
LISTEN = (
    "restate_host",
    "ingress_port",
    "admin_port",
    "node_port",
    "endpoint_port",
    "gateway_host",
    "gateway_port",
)
"""The settings that say where the parts listen: what a later command must match."""


def run_file(settings: Settings) -> Path:
    return settings.home / RUN_FILE


def read(settings: Settings) -> dict[str, Any]:
    """The record, or {} when there is none (or it cannot be read)."""
    try:
        found = json.loads(run_file(settings).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def pids(record: dict[str, Any]) -> dict[str, int]:
    listed = record.get("pids")
    if not isinstance(listed, dict):
        return {}
    return {str(k): int(v) for k, v in listed.items() if isinstance(v, int)}


def write_private(path: Path, text: str, *, append: bool = False) -> None:
    """Write (or append) `text` to `path`, readable by the user alone: 0600, and its
    folder 0700 when it is made here."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "w") as out:
        os.fchmod(fd, 0o600)  # a file that was already there keeps its own mode otherwise
        out.write(text)


def write(
    settings: Settings, started: dict[str, int | None], *, cluster: dict[str, Any] | None = None
) -> None:
    """The record; `cluster`: the cluster layout's ports (`Layout.to_json`), when that is
    what runs."""
    listen = {name: getattr(settings, name) for name in LISTEN}
    record: dict[str, Any] = {"pids": started, "listen": listen}
    if cluster is not None:
        record["cluster"] = cluster
    write_private(run_file(settings), json.dumps(record))


def located(settings: Settings) -> Settings:
    """`settings` with the addresses the home's stack listens on, for each one no variable
    set."""
    listen = read(settings).get("listen")
    if not isinstance(listen, dict):
        return settings
    update = {
        name: listen[name]
        for name in LISTEN
        if name in listen and name not in settings.model_fields_set
    }
    return settings.model_copy(update=update) if update else settings


def exports(settings: Settings) -> list[str]:
    """Shell lines that give a shell this stack's addresses (`eval "$(teaspill env)"`)."""
    values = {
        "TEASPILL_HOME": str(settings.home.resolve()),
        "TEASPILL_GATEWAY_URL": local_url(settings),
        "TEASPILL_INGRESS_URL": settings.ingress_url,
        "TEASPILL_ADMIN_URL": settings.admin_url,
    }
    return [f"export {name}={_quoted(value)}" for name, value in values.items()]


def _quoted(value: str) -> str:
    safe = all(c.isalnum() or c in "/:._-[]" for c in value)
    return value if safe else "'" + value.replace("'", "'\\''") + "'"
