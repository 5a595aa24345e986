"""A name checked against its pattern ends where the text ends: one with a trailing
newline is refused (a `$` would let it through, and the newline would reach a URL, SQL or
a path)."""

from __future__ import annotations

import pytest

from schemas.address import InvalidAddressError, parse_address
from schemas.workspace import artifact_name
from services.keys import well_formed
from services.lifecycle.restate_admin import AdminError, RestateAdminApi
from services.mcp.hub import server_of

KEY = "tsk_abcdefghijkl_" + "A" * 32
DIGEST = "ab" * 32


def test_an_address_with_a_trailing_newline_is_refused() -> None:
    assert str(parse_address("acme.foo")) == "acme.foo"
    with pytest.raises(InvalidAddressError, match="has an invalid part 'foo\\\\n'"):
        parse_address("acme.foo\n")


def test_restate_servers_sql_is_not_asked_about_a_name_with_a_newline() -> None:
    admin = RestateAdminApi("http://127.0.0.1:9")  # refused before anything is sent
    try:
        with pytest.raises(AdminError, match="is not a name restate-server's SQL is asked"):
            admin.keys_starting("Agent", "acme.foo\n")
        with pytest.raises(AdminError):
            admin.keys_starting("Agent\n", "acme.foo")
    finally:
        admin.close()


def test_keys_digests_and_mcp_names_end_with_the_text() -> None:
    assert well_formed(KEY)
    assert not well_formed(KEY + "\n")
    assert artifact_name(DIGEST) == f"ab/{DIGEST}"
    assert artifact_name(DIGEST + "\n") is None
    assert server_of("mcp:time/now") == "time"
    assert server_of("mcp:time/now\n") is None
