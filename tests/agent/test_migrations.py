"""The agent's stored record: written in the newest layout, read back through the ordered
migrations, refused with a sentence when newer than the code."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from schemas.state import AgentRecord, StoredAgent
from services.agent import migrations
from services.agent.migrations import VERSION, NewerStateError, load


def test_a_record_in_the_newest_layout_reads_back_as_written() -> None:
    stored = StoredAgent(VERSION, AgentRecord(turns=3), finished="inv_1")
    assert load(msgspec.json.encode(stored)) == stored


def test_an_older_layout_goes_through_each_later_migration_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def renamed(value: dict[str, Any]) -> dict[str, Any]:
        value["finished"] = value.pop("last_wake")
        return value

    def counted(value: dict[str, Any]) -> dict[str, Any]:
        value["record"]["turns"] += 1
        return value

    monkeypatch.setattr(migrations, "MIGRATIONS", (renamed, counted))
    monkeypatch.setattr(migrations, "VERSION", 3)
    old = b'{"version":1,"record":{"turns":2},"last_wake":"inv_7"}'
    assert load(old) == StoredAgent(3, AgentRecord(turns=3), finished="inv_7")
    assert load(b'{"version":2,"record":{"turns":2},"finished":"inv_8"}').record.turns == 3


def test_a_record_from_newer_code_is_refused_with_a_sentence() -> None:
    with pytest.raises(NewerStateError, match=f"layout {VERSION + 1}, newer"):
        load(msgspec.json.encode(StoredAgent(VERSION + 1)))
