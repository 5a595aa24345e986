"""The cluster layout's own PostgreSQL (`services.stack.postgres`): a real server in a
temporary home, and the layout's port for it."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from services.stack import StackError, isolated_settings
from services.stack.cluster import Layout
from services.stack.postgres import Postgres, answers, find_postgres
from services.stack.process import free_port


def test_the_layout_puts_postgres_after_the_nodes_unless_a_url_is_given(tmp_path: Path) -> None:
    settings = isolated_settings(tmp_path)
    layout = Layout.derived(settings)
    assert layout.postgres == settings.node_port + 3
    assert layout.postgres not in {n.node_port for n in layout.nodes}
    assert Layout.from_json(layout.to_json()) == layout
    given = settings.model_copy(update={"projection_url": "postgresql://u@db.internal/x"})
    assert Layout.derived(given).postgres is None
    assert Layout.free(given).postgres is None
    old = {k: v for k, v in layout.to_json().items() if k != "postgres"}
    assert Layout.from_json(old).postgres is None, "a record from before reads as it was"


def test_made_in_the_home_private_password_only_and_kept_across_restarts(tmp_path: Path) -> None:
    home = tmp_path / "home"
    server = Postgres(isolated_settings(home), free_port())
    server.start()
    try:
        with psycopg.connect(server.url, autocommit=True) as db:
            db.execute("create table kept (n int)")
            db.execute("insert into kept values (7)")
        no_password = server.url.replace(server.url.split("@")[0], "postgresql://teaspill")
        assert not answers(no_password), "a connection without the password is refused"
        assert (home / "postgres" / "password").stat().st_mode & 0o777 == 0o600
        assert (home / "postgres" / "data").stat().st_mode & 0o077 == 0
        server.stop()
        assert not server.running
        server.start()
        with psycopg.connect(server.url) as db:
            assert db.execute("select n from kept").fetchall() == [(7,)]
    finally:
        server.stop()
    assert "database system is shut down" in (home / "logs" / "postgres.log").read_text()


def test_without_postgres_a_sentence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TEASPILL_POSTGRES_BIN", str(tmp_path))
    with pytest.raises(StackError, match="PostgreSQL is not installed: run `make install`"):
        find_postgres()
