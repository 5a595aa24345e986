"""The service endpoint serves restate-server alone: requests it did not sign are refused."""

from __future__ import annotations

import stat

import httpx
import pytest

from schemas.spec import AgentSpec
from schemas.wake import Message
from services.executor.scripted import script
from services.stack.identity import PRIVATE_KEY, public_key
from tests.durable.conftest import LiveStack

pytestmark = pytest.mark.durable


def test_an_unsigned_request_to_the_endpoint_is_refused(stack: LiveStack, address: str) -> None:
    key = stack.home / PRIVATE_KEY
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    assert public_key(stack.home).startswith("publickeyv1_")
    endpoint = stack.settings.endpoint_url
    with httpx.Client(http2=False, timeout=10) as client:
        assert client.get(f"{endpoint}/health").status_code == 200
        discover = client.get(f"{endpoint}/discover")
        forged = client.post(
            f"{endpoint}/invoke/Tenant/add_key",
            headers={
                "content-type": "application/vnd.restate.invocation.v5",
                "x-restate-signature-scheme": "v1",
                "x-restate-jwt-v1": "eyJhbGciOiJFZERTQSJ9.e30.AAAA",
            },
            content=b"",
        )
    assert discover.status_code == 401
    assert forged.status_code == 401
    # Restate's own requests are signed, and served.
    spec = AgentSpec(kind="signed", instructions="x", model="script")
    stack.ingress.send_wake(address, Message(script({"reply": "signed"}), spec=spec))
    assert stack.wait_for_turn_end(address, 1).reply == "signed"
