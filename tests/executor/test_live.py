"""Live text: pushed in pieces to every gateway, each re-sent from the offset it last said
it holds, never gapped."""

from __future__ import annotations

import asyncio
import threading

import httpx
import msgspec

from schemas.chat import ChatMessage
from schemas.live import LiveBatch, LiveDelta
from schemas.model import ModelRequest
from services.executor.live import TOKEN_HEADER, LiveText, Post, http_post
from services.executor.llama import _Shown
from services.executor.scripted import DirectiveExecutor

REQUEST = ModelRequest(
    "script", (ChatMessage(role="user", content="hi there"),), agent="acme.a", turn=2, round=1
)


def taking(sent: list[LiveDelta], fails: frozenset[int] = frozenset()) -> Post:
    """A gateway that holds all it is sent, except for the pushes numbered in `fails`
    (from 0), which it does not answer."""
    pushes = iter(range(1_000))

    async def post(batch: LiveBatch) -> int | None:
        sent.extend(batch.deltas)
        if next(pushes) in fails:
            return None
        last = batch.deltas[-1]
        return last.offset + len(last.text)

    return post


def test_a_failed_push_is_sent_again_longer_from_the_same_offset() -> None:
    sent: list[LiveDelta] = []

    async def run() -> None:
        text = LiveText(REQUEST, [taking(sent, fails=frozenset({1}))])
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


def test_each_gateway_gets_the_text_from_its_own_offset() -> None:
    one: list[LiveDelta] = []
    two: list[LiveDelta] = []

    async def run() -> None:
        text = LiveText(REQUEST, [taking(one), taking(two, fails=frozenset({0, 1}))])
        for piece in ("Hello ", "wor", "ld"):
            text.write(piece)
            await text.push()
        await text.push()

    asyncio.run(run())
    assert [(d.offset, d.text) for d in one] == [(0, "Hello "), (6, "wor"), (9, "ld")]
    assert [(d.offset, d.text) for d in two] == [
        (0, "Hello "),
        (0, "Hello wor"),
        (0, "Hello world"),
    ]
    assert {d.attempt for d in one} == {d.attempt for d in two}, "one attempt, seen by both"


def test_a_gateway_that_does_not_answer_holds_up_no_other() -> None:
    one: list[LiveDelta] = []
    got = asyncio.Event()
    never = asyncio.Event()

    async def first(batch: LiveBatch) -> int | None:
        one.extend(batch.deltas)
        got.set()
        last = batch.deltas[-1]
        return last.offset + len(last.text)

    async def hung(batch: LiveBatch) -> int | None:
        await never.wait()
        return None

    async def run() -> None:
        text = LiveText(REQUEST, [first, hung])
        pusher = asyncio.create_task(text.run(interval=0.01))
        for piece in ("Hello ", "world"):
            got.clear()
            text.write(piece)
            await asyncio.wait_for(got.wait(), 5)
        pusher.cancel()

    asyncio.run(run())
    assert [(d.offset, d.text) for d in one] == [(0, "Hello "), (6, "world")]


def test_a_gateway_that_holds_less_than_it_was_sent_from_gets_the_rest_again() -> None:
    sent: list[LiveDelta] = []
    held = iter([6, 0, 11])  # it took "Hello ", then started again empty, then took all

    async def post(batch: LiveBatch) -> int | None:
        sent.extend(batch.deltas)
        return next(held)

    async def run() -> None:
        text = LiveText(REQUEST, [post])
        text.write("Hello ")
        await text.push()
        text.write("world")
        await text.push()
        await text.push()
        await text.push()

    asyncio.run(run())
    assert [(d.offset, d.text) for d in sent] == [(0, "Hello "), (6, "world"), (0, "Hello world")]


def test_pushes_go_to_the_gateway_with_the_token_and_a_dead_gateway_is_no_error() -> None:
    seen: list[httpx.Request] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"deltas": 1, "fresh": 0, "held": [1]})

    def older(request: httpx.Request) -> httpx.Response:
        return httpx.Response(204)

    def gone(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    batch = LiveBatch((LiveDelta("acme.a", 1, 1, "x", 0, "hi"),))

    async def run() -> tuple[int | None, ...]:
        answers = []
        for answer in (gateway, older, gone):
            async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
                answers.append(await http_post("http://gw", "sekrit", client)(batch))
        return tuple(answers)

    assert asyncio.run(run()) == (1, 2, None), "what it holds; all of it (no answer); none"
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
