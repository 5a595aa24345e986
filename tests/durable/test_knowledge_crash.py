"""A release cut short by a SIGKILL of the endpoint: the document is a draft in every
store while the release waits for the projection, and once the endpoint is back the
release ends once, the document released with its passages indexed exactly once."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from schemas.knowledge import DocumentAnswer, DocumentRef, DocumentSearch, DocumentUpload
from services.contracts import RELEASE_DOCUMENT, UPLOAD_DOCUMENT
from services.knowledge.object import TALLY
from services.knowledge.passages import passages
from services.lifecycle.restate_admin import RestateAdminApi
from services.projection.knowledge import search_now
from tests.durable.conftest import LiveStack, eventually, live_stack, stack_settings

pytestmark = pytest.mark.durable

TENANT = "acme"
MARKER = "osprey-garnet-2291"
TEXT = f"""# Field guide

Ospreys nest on the north cliff.

## Feeding

They dive for fish at the {MARKER} shoal.

## Moult

Feathers are replaced over the winter.
"""


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveStack]:
    with live_stack(stack_settings(tmp_path / "home")) as stack:
        yield stack


def _rows(live: LiveStack, sql: str) -> list[dict[str, Any]]:
    admin = RestateAdminApi(live.settings.admin_url)
    try:
        return admin.query(sql)
    finally:
        admin.close()


def restate_state(live: LiveStack) -> dict[str, Any]:
    """The tenant's `Knowledge` state in Restate: key → decoded value."""
    found = _rows(
        live,
        "select key, value_utf8 from state where service_name = 'Knowledge'"  # noqa: S608
        f" and service_key = '{TENANT}'",
    )
    return {str(r["key"]): msgspec.json.decode(r["value_utf8"]) for r in found}


def invocations(live: LiveStack) -> list[tuple[str, str, str]]:
    """The invocations of `Knowledge` and the `Projector` Restate knows of, in order."""
    found = _rows(
        live,
        "select target_service_name, target_handler_name, status from sys_invocation"
        " where target_service_name in ('Knowledge', 'Projector') order by created_at",
    )
    return [(r["target_service_name"], r["target_handler_name"], r["status"]) for r in found]


def retrying(live: LiveStack) -> bool:
    found = _rows(
        live,
        "select retry_count from sys_invocation where target_service_name = 'Projector'"
        " and target_handler_name = 'document'",
    )
    return any((row["retry_count"] or 0) >= 1 for row in found)


def projection(live: LiveStack) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The projection's documents (id, status, passages) and passages (document, n)."""
    path = live.home / "projection.db"
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        documents = db.execute("select id, status, passages from documents").fetchall()
        cut = db.execute("select document, n from passages order by document, n").fetchall()
    return documents, cut


def found(live: LiveStack) -> list[tuple[str, int]]:
    hits = search_now(live.home / "projection.db", DocumentSearch(TENANT, MARKER))
    return [(hit.document, hit.passage.n) for hit in hits]


def test_a_release_cut_by_a_sigkill_ends_once_and_indexes_its_passages_once(
    live: LiveStack,
) -> None:
    upload = DocumentUpload("Field guide", "markdown", TEXT)
    draft = live.ingress.call(UPLOAD_DOCUMENT, upload, TENANT).document
    assert draft is not None
    record, text, digest = f"d.{draft.id}", f"t.{draft.id}", f"h.{draft.sha256}"
    tally = {"documents": 1, "chars": len(TEXT)}
    before = restate_state(live)
    assert before.keys() == {record, text, digest, TALLY}
    assert (before[record]["status"], before[text], before[TALLY]) == (
        "draft", {"text": TEXT}, tally,
    )  # fmt: skip
    assert projection(live) == ([(draft.id, "draft", 0)], [])
    assert invocations(live) == [("Knowledge", "upload", "completed")]

    # The projection cannot be written (another writer holds it), so the release waits in
    # its call to the Projector, which fails and is retried; then the endpoint is killed.
    lock = sqlite3.connect(live.home / "projection.db", isolation_level=None)
    lock.execute("begin immediate")
    sent = live.ingress.send(RELEASE_DOCUMENT, DocumentRef(draft.id), TENANT, "release-once")
    eventually(lambda: retrying(live) or None, 60, "the Projector's write to be retried")
    during = restate_state(live)
    assert during.keys() == before.keys()
    assert during[record]["status"] == "released", "journaled before the call"
    assert (during[text], during[digest], during[TALLY]) == (
        before[text], before[digest], before[TALLY],
    )  # fmt: skip
    assert projection(live) == ([(draft.id, "draft", 0)], []), "not searchable yet"
    assert found(live) == []
    assert [(s, h) for s, h, status in invocations(live) if status != "completed"] == [
        ("Knowledge", "release"),
        ("Projector", "document"),
    ]
    live.endpoint.kill()
    lock.execute("rollback")
    lock.close()
    live.endpoint.start()

    answer = httpx.get(f"{live.settings.ingress_url}/restate/invocation/{sent}/attach", timeout=120)
    assert answer.status_code == 200, answer.text
    released = msgspec.json.decode(answer.content, type=DocumentAnswer).document
    cut = passages(TEXT, "markdown")
    assert released is not None
    assert (released.id, released.status, released.passages) == (draft.id, "released", len(cut))
    after = restate_state(live)
    assert after.keys() == before.keys()
    assert after[record] == msgspec.to_builtins(released)
    assert (after[text], after[TALLY]) == (before[text], tally), "counted once"
    documents, indexed = projection(live)
    assert documents == [(draft.id, "released", len(cut))]
    assert indexed == [(draft.id, p.n) for p in cut], "each passage once"
    assert found(live) == [(draft.id, 2)]
    assert invocations(live) == [
        ("Knowledge", "upload", "completed"),
        ("Knowledge", "release", "completed"),
    ], "the release ran to its end once; the Projector's call keeps no journal"
