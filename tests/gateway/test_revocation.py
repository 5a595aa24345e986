"""A revocation holds even when the projection is rolled back: the gateway confirms a key
with its tenant's record in Restate, which the projection only copies. It reads that record
from Restate's storage, so it holds with the service endpoint down too."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from pathlib import Path

import httpx
import msgspec
import pytest

from schemas.tenant import ApiKey
from services.keys import hash_key, new_key
from services.projection.store import ProjectionStore
from services.settings import Settings
from services.stack import Stack, isolated_settings
from tests.durable.conftest import eventually
from tests.gateway.test_stack import CREATED

pytestmark = pytest.mark.durable


def add_key(settings: Settings, scope: str) -> str:
    plaintext, key = new_key("acme", scope, CREATED)  # type: ignore[arg-type]
    added = httpx.post(
        f"{settings.ingress_url}/Tenant/acme/add_key",
        content=msgspec.json.encode(key),
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert added.status_code == 200, added.text
    return plaintext


def status(http: httpx.Client, key: str) -> int:
    return http.get("/v1/me", headers={"Authorization": f"Bearer {key}"}).status_code


def works(http: httpx.Client, key: str) -> None:
    eventually(lambda: status(http, key) == 200 or None, 60, "the key to work")


def projected(path: Path, plaintext: str) -> ApiKey | None:
    async def read() -> ApiKey | None:
        async with await ProjectionStore.open(path, readonly=True) as store:
            return await store.key_by_hash(hash_key(plaintext))

    return asyncio.run(read())


def test_a_revoked_key_stays_refused_on_a_projection_from_before_the_revocation(
    tmp_path: Path,
) -> None:
    settings = isolated_settings(tmp_path / "home", key_cache_seconds=1.0)
    projection = settings.home / "projection.db"
    with Stack(settings) as stack, httpx.Client(base_url=stack.gateway.url) as http:
        admin, doomed = add_key(settings, "admin"), add_key(settings, "read")
        for key in (admin, doomed):
            works(http, key)
        before = tmp_path / "before.db"
        with sqlite3.connect(projection) as source, sqlite3.connect(before) as copy:
            source.backup(copy)
        key_id = doomed.split("_")[1]
        revoked = http.post(
            f"/v1/keys/{key_id}/revoke", headers={"Authorization": f"Bearer {admin}"}
        )
        assert revoked.status_code == 200, revoked.text
        eventually(lambda: status(http, doomed) == 401 or None, 30, "the revocation to hold")

        stack.gateway.stop()
        stack.endpoint.kill()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{projection}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(before, projection)
        rolled_back = projected(projection, doomed)
        assert rolled_back is not None
        assert rolled_back.revoked_at is None

        # The endpoint stays down: the tenant's record is read from Restate's storage.
        stack.gateway.start()
        still_revoked(http, doomed, key_id)
        assert status(http, admin) == 200
        stack.endpoint.start()
        still_revoked(http, doomed, key_id)


def still_revoked(http: httpx.Client, key: str, key_id: str) -> None:
    refused = http.get("/v1/me", headers={"Authorization": f"Bearer {key}"})
    assert refused.status_code == 401
    assert refused.json()["error"]["message"] == f"API key {key_id} was revoked"
