"""Live text: pushed in pieces, re-sent from the last acknowledged offset, never gapped."""

from __future__ import annotations

import asyncio
import threading

import httpx
import msgspec

from schemas.chat import ChatMessage
from schemas.live import LiveBatch, LiveDelta
from schemas.model import ModelRequest
from services.executor.live import TOKEN_HEADER, LiveText, http_post
from services.executor.llama import _Shown
from services.executor.scripted import DirectiveExecutor

REQUEST = ModelRequest(
    "script", (ChatMessage(role="user", content="hi there"),), agent="acme.a", turn=2, round=1
)


def test_a_failed_push_is_sent_again_longer_from_the_same_offset() -> None:
    sent: list[LiveDelta] = []
    answers = iter([True, False, True])

    async def post(batch: LiveBatch) -> bool:
        sent.extend(batch.deltas)
        return next(answers)

    async def run() -> None:
        text = LiveText(REQUEST, post)
        text.write("Hello ")
        await text.push()
        text.write("wor")
        await text.push()
        text.write("ld")
        await text.push()
        await text.push()

    asyncio.run(run())
    assert [(d.offset, d.text) for d in sent] == [(0, "Hello "), (6, "wor"), (6, "world")]
    assert {(d.agent, d.turn, d.round) for d in sent} == {("acme.a", 2, 1)}
    assert len({d.attempt for d in sent}) == 1


def test_pushes_go_to_the_gateway_with_the_token_and_a_dead_gateway_is_no_error() -> None:
    seen: list[httpx.Request] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    def gone(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    batch = LiveBatch((LiveDelta("acme.a", 1, 1, "x", 0, "hi"),))

    async def run() -> tuple[bool, bool]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(gateway)) as up:
            ok = await http_post("http://gw", "sekrit", up)(batch)
        async with httpx.AsyncClient(transport=httpx.MockTransport(gone)) as down:
            failed = await http_post("http://gw", "sekrit", down)(batch)
        return ok, failed

    assert asyncio.run(run()) == (True, False)
    assert seen[0].url.path == "/internal/live"
    assert seen[0].headers[TOKEN_HEADER] == "sekrit"
    assert msgspec.json.decode(seen[0].content, type=LiveBatch) == batch


def test_with_tools_only_the_decoded_reply_is_shown_never_tool_json() -> None:
    shown: list[str] = []
    view = _Shown(shown.append, json_reply=True)
    for raw in ('{"tool": "add", "argu', '{"tool": "add", "arguments": {}}'):
        view.update(raw)
    assert shown == []
    for raw in ('{"reply": "It', '{"reply": "It is \\"', '{"reply": "It is \\"fine\\""}'):
        view.update(raw)
    assert "".join(shown) == 'It is "fine"'


def test_the_scripted_model_writes_its_reply_in_pieces() -> None:
    pieces: list[str] = []
    reply = DirectiveExecutor().generate(REQUEST, threading.Event(), pieces.append)
    assert len(pieces) > 1
    assert "".join(pieces) == reply.message.content == "You said: hi there"
