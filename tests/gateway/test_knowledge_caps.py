"""What a tenant may keep of knowledge documents, on a real stack with small ceilings: a
document cut into more than 2,000 passages is refused (413), and so is an upload past the
tenant's documents or their characters (429), each with a sentence naming the limit; a
refused upload leaves nothing, and a deletion gives its share back."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from schemas.knowledge import MAX_PASSAGES
from services.ingress import Ingress
from services.knowledge.object import TALLY
from services.lifecycle.restate_admin import RestateAdminApi
from services.stack import Stack, isolated_settings
from tests.durable.conftest import eventually
from tests.gateway.test_erasure import Live, _restate_rows

pytestmark = pytest.mark.durable

DOCUMENTS, CHARS = 3, 50_000


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    settings = isolated_settings(
        tmp_path_factory.mktemp("knowledge-caps-home"),
        tenant_documents=DOCUMENTS,
        tenant_document_chars=CHARS,
    )
    with (
        Stack(settings),
        httpx.Client(base_url=f"http://127.0.0.1:{settings.gateway_port}", timeout=60) as http,
        contextlib.closing(Ingress(settings.ingress_url)) as ingress,
    ):
        yield Live(settings, http, ingress)


def sections(n: int, word: str) -> str:
    """A Markdown text of `n` sections, each a passage of its own (within the gateway's
    64 KiB body)."""
    return "".join(f"# {word}{i}\n\nis {i}\n\n" for i in range(n))


def post(live: Live, auth: dict[str, str], text: str) -> httpx.Response:
    body = {"title": "Guide", "text": text, "format": "markdown"}
    return live.http.post("/v1/knowledge", json=body, headers=auth)


def listed(live: Live, auth: dict[str, str]) -> list[dict[str, Any]]:
    documents: list[dict[str, Any]] = live.http.get("/v1/knowledge", headers=auth).json()[
        "documents"
    ]
    return documents


def message(answer: httpx.Response) -> str:
    text: str = answer.json()["error"]["message"]
    return text


def test_a_document_of_too_many_passages_is_refused_and_one_of_the_most_is_kept(
    live: Live,
) -> None:
    acme = live.key("acme", "write")
    refused = post(live, acme, sections(MAX_PASSAGES + 1, "walrus"))
    assert refused.status_code == 413, refused.text
    assert message(refused) == (
        f"A document is cut into at most {MAX_PASSAGES} passages (at paragraphs and"
        f" headings); this one would make {MAX_PASSAGES + 1}: split it into smaller documents."
    )
    assert listed(live, acme) == []
    assert _restate_rows(live.settings, "walrus")["state"] == 0, "nothing of it kept"

    most = post(live, acme, sections(MAX_PASSAGES, "manual"))
    assert most.status_code == 201, most.text
    released = live.http.post(f"/v1/knowledge/{most.json()['id']}/release", headers=acme)
    assert released.status_code == 200, released.text
    assert released.json()["passages"] == MAX_PASSAGES
    assert live.http.delete(f"/v1/knowledge/{most.json()['id']}", headers=acme).status_code == 200


def test_a_tenants_documents_and_characters_are_counted_and_a_deletion_gives_back(
    live: Live,
) -> None:
    globex, initech = live.key("globex", "write"), live.key("initech", "write")
    made = [post(live, globex, f"Note {i} on the heron.") for i in range(DOCUMENTS)]
    assert [m.status_code for m in made] == [201] * DOCUMENTS
    again = post(live, globex, "Note 0 on the heron.")
    assert again.status_code == 200, "a text kept already costs nothing"
    fourth = post(live, globex, "Note 4 on the heron.")
    assert fourth.status_code == 429, fourth.text
    assert message(fourth) == (
        f"Tenant globex has {DOCUMENTS} documents, the most one tenant may keep"
        " (TEASPILL_TENANT_DOCUMENTS): delete one first."
    )
    assert post(live, initech, "Another tenant's note.").status_code == 201, "its own tally"

    first = made[0].json()
    assert live.http.delete(f"/v1/knowledge/{first['id']}", headers=globex).status_code == 200
    held = sum(m.json()["chars"] for m in made[1:])
    big = "x" * (CHARS - held) + " and one more"
    past = post(live, globex, big)
    assert past.status_code == 429, past.text
    assert message(past) == (
        f"Tenant globex's documents hold {held} characters; this one's {len(big)} would"
        f" pass the most one tenant may keep, {CHARS} (TEASPILL_TENANT_DOCUMENT_CHARS):"
        " delete some first."
    )
    fits = post(live, globex, big[: CHARS - held])
    assert fits.status_code == 201, fits.text
    assert len(listed(live, globex)) == DOCUMENTS
    assert post(live, globex, "One too many.").status_code == 429


def test_documents_kept_before_the_tally_are_counted_from_their_records(live: Live) -> None:
    hooli = live.key("hooli", "write")
    kept = [post(live, hooli, f"Hooli note {i}.") for i in range(DOCUMENTS - 1)]
    assert [answer.status_code for answer in kept] == [201] * (DOCUMENTS - 1)
    _drop_the_tally(live, "hooli")
    assert post(live, hooli, "The last note that fits.").status_code == 201
    refused = post(live, hooli, "One past the ceiling.")
    assert refused.status_code == 429, refused.text
    assert f"has {DOCUMENTS} documents" in message(refused)


def _knowledge_state(live: Live, tenant: str) -> dict[str, bytes]:
    admin = RestateAdminApi(live.settings.admin_url)
    try:
        rows = admin.query(
            "select key, value from state where service_name = 'Knowledge'"  # noqa: S608
            f" and service_key = '{tenant}'"
        )
    finally:
        admin.close()
    return {str(row["key"]): bytes.fromhex(row["value"]) for row in rows}


def _drop_the_tally(live: Live, tenant: str) -> None:
    """The tenant's `Knowledge` state as a version that kept no tally left it."""
    state = _knowledge_state(live, tenant)
    assert TALLY in state
    del state[TALLY]
    answer = live.http.post(
        f"{live.settings.admin_url}/services/Knowledge/state",
        json={"object_key": tenant, "new_state": {k: list(v) for k, v in state.items()}},
    )
    assert answer.is_success, answer.text
    eventually(
        lambda: _knowledge_state(live, tenant).keys() == state.keys() or None, 10, "the new state"
    )
