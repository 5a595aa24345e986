"""The memory tools' scopes, decided by the server from the turn, never by the model."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

from schemas.memory import MemoryAnswer, MemoryNote, MemoryRecord, MemoryScope
from services.tools.base import ToolContext, ToolError
from services.tools.memory import TENANT_REFUSED, remember_tool, scopes

AGENT = "acme.u-0123"
AT = datetime(2026, 12, 1, tzinfo=UTC)


def kept_in(arguments: dict[str, object], context: ToolContext) -> MemoryScope:
    sent: list[MemoryNote] = []

    def send(note: MemoryNote) -> MemoryAnswer:
        sent.append(note)
        return MemoryAnswer(MemoryRecord("mem" + "1" * 20, note.scope, note.kind, note.text, AT))

    answer = remember_tool(send).call({"text": "a note", **arguments}, context)
    [note] = sent
    assert msgspec.json.decode(answer)["scope"] == note.scope.kind
    return note.scope


def context(user: str = "", *, tenant_writes: bool = True) -> ToolContext:
    return ToolContext(AGENT, "key", Path("/nowhere"), user, tenant_writes)


def test_without_a_user_notes_are_the_agents_or_the_tenants() -> None:
    assert kept_in({}, context()) == MemoryScope("acme", "agent", AGENT)
    assert kept_in({"scope": "user"}, context()) == MemoryScope("acme", "agent", AGENT)
    assert kept_in({"scope": "tenant"}, context()) == MemoryScope("acme", "tenant")
    assert scopes(AGENT) == (MemoryScope("acme", "agent", AGENT), MemoryScope("acme", "tenant"))


def test_with_a_user_notes_are_the_users_and_the_tenant_needs_the_spec() -> None:
    user = context("U", tenant_writes=False)
    assert kept_in({}, user) == MemoryScope("acme", "user", "U")
    assert kept_in({"scope": "agent"}, user) == MemoryScope("acme", "agent", AGENT)
    with pytest.raises(ToolError, match=r"memory\.tenant_writes"):
        kept_in({"scope": "tenant"}, user)
    assert "signed-in user" in TENANT_REFUSED
    allowed = context("U", tenant_writes=True)
    assert kept_in({"scope": "tenant"}, allowed) == MemoryScope("acme", "tenant")
    assert scopes(AGENT, "U") == (
        MemoryScope("acme", "agent", AGENT),
        MemoryScope("acme", "user", "U"),
        MemoryScope("acme", "tenant"),
    )
