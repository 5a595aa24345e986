"""What one tenant may hold in its `Tenant` object: versions of a kind, kinds, keys that
are not revoked. Past each, the publish or the key is refused (429) with a sentence."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from schemas.spec import AgentSpec
from schemas.tenant import ApiKey, KeyRef
from services.contracts import ADD_KEY, PUBLISH, REVOKE_KEY
from services.ingress import IngressError
from services.keys import new_key
from services.stack import isolated_settings
from tests.durable.conftest import LiveStack, live_stack

pytestmark = pytest.mark.durable
CREATED = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    home: Path = tmp_path_factory.mktemp("quotas")
    settings = isolated_settings(home, spec_versions=2, tenant_kinds=2, tenant_keys=2)
    with live_stack(settings) as stack:
        yield stack


def refusal(call: Callable[[], object]) -> IngressError:
    with pytest.raises(IngressError) as refused:
        call()
    return refused.value


def test_a_kind_past_its_versions_and_a_tenant_past_its_kinds_are_refused(
    small: LiveStack,
) -> None:
    def publish(kind: str) -> object:
        return small.ingress.call(PUBLISH, AgentSpec(kind, "Help.", model="script"), "q1")

    publish("one")
    publish("one")
    third = refusal(lambda: publish("one"))
    assert third.status == 429
    assert third.message == (
        "Tenant q1 has published 2 versions of kind 'one', the most one kind may have "
        "(TEASPILL_SPEC_VERSIONS): publish it under another kind."
    )
    publish("two")
    kinds = refusal(lambda: publish("three"))
    assert kinds.status == 429
    assert kinds.message == (
        "Tenant q1 has published 2 spec kinds, the most one tenant may have "
        "(TEASPILL_TENANT_KINDS): publish a new version of one of them."
    )


def test_a_tenant_past_its_keys_is_refused_until_it_revokes_one(small: LiveStack) -> None:
    def add() -> ApiKey:
        return small.ingress.call(ADD_KEY, new_key("q2", "read", CREATED)[1], "q2")

    first = add()
    add()
    third = refusal(add)
    assert third.status == 429
    assert third.message == (
        "tenant q2 holds 2 keys that are not revoked, the most one tenant may hold "
        "(TEASPILL_TENANT_KEYS): revoke one first"
    )
    small.ingress.call(REVOKE_KEY, KeyRef(first.id), "q2")
    add()
