"""A typed Python client for the teaspill HTTP API (the gateway), sync and async.

    from services.client import Client

    with Client("http://127.0.0.1:8000", key) as client:
        sent = client.send("acme.helper", "What is 6*7?", kind="assistant")
        for item in until_turn_ends(client.follow("acme.helper", after=sent.after_seq)):
            print(item)

Every failure raises `ApiError` (the gateway's sentence and status; status 0 when the
gateway does not answer).
"""

from schemas.events import Event
from schemas.live import LiveDelta, Retraction
from services.client.aio import AsyncClient
from services.client.errors import ApiError
from services.client.models import (
    Accepted,
    Agent,
    AgentPage,
    ApprovalAccepted,
    Forked,
    HoldAccepted,
    Hook,
    Item,
    KeyInfo,
    Me,
    NewHook,
    NewKey,
    StopAccepted,
)
from services.client.sync import Client, until_turn_ends

__all__ = [
    "Accepted",
    "Agent",
    "AgentPage",
    "ApiError",
    "ApprovalAccepted",
    "AsyncClient",
    "Client",
    "Event",
    "Forked",
    "HoldAccepted",
    "Hook",
    "Item",
    "KeyInfo",
    "LiveDelta",
    "Me",
    "NewHook",
    "NewKey",
    "Retraction",
    "StopAccepted",
    "until_turn_ends",
]
