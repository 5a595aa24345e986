"""The layout of an agent's stored record, as an ordered list of migrations. Append only:
never edit a migration that has shipped.

Each migration takes the stored JSON object of one version and returns it in the next
one's layout; `MIGRATIONS[0]` turns version 1 into version 2. A value is written in the
newest layout, `VERSION`, and one written earlier is brought forward when it is read,
before it is decoded. A value from a newer version than this code knows is refused with
a sentence: the code under the agent was rolled back past its state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from schemas.state import StoredAgent

Migration = Callable[[dict[str, Any]], dict[str, Any]]

MIGRATIONS: tuple[Migration, ...] = ()
VERSION = 1 + len(MIGRATIONS)


class NewerStateError(Exception):
    """The value was written by a newer version; the message is the sentence."""


class _Version(msgspec.Struct):
    version: int


def load(raw: bytes) -> StoredAgent:
    """The stored value, brought forward to `VERSION`."""
    version = msgspec.json.decode(raw, type=_Version).version
    if version == VERSION:
        return msgspec.json.decode(raw, type=StoredAgent)
    if version > VERSION:
        raise NewerStateError(
            f"The agent's state was written in layout {version}, newer than this version "
            f"of teaspill reads (up to {VERSION}): run the version that wrote it."
        )
    value: dict[str, Any] = msgspec.json.decode(raw)
    for migration in MIGRATIONS[version - 1 :]:
        value = migration(value)
    value["version"] = VERSION
    return msgspec.convert(value, StoredAgent)
