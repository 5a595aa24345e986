"""The OpenAI-compatible executor against a fake transport (`httpx.MockTransport`).

The real server (llama-cpp-python's own) is exercised end to end in
tests/durable/test_remote_models.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from schemas.chat import ChatMessage
from schemas.model import ModelReply, ModelRequest
from services.executor.chat_api import ModelError
from services.executor.config import RemoteModel
from services.executor.remote import RemoteExecutor

REQUEST = ModelRequest(model="remote", messages=(ChatMessage(role="user", content="Hi"),))
KEY = "sk-test-0123456789"


def sse(*chunks: dict[str, Any]) -> bytes:
    lines = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks]
    return ("".join(lines) + "data: [DONE]\n\n").encode()


def text_chunk(text: str, finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"delta": {"content": text}, "finish_reason": finish}]}


def executor(
    handler: Callable[[httpx.Request], Any], monkeypatch: pytest.MonkeyPatch, **config: Any
) -> RemoteExecutor:
    monkeypatch.setenv("TEST_REMOTE_KEY", KEY)
    settings = RemoteModel(
        "http://models.test/v1", "served-id", api_key_env="TEST_REMOTE_KEY", **config
    )
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return RemoteExecutor("remote", settings, client)


def run(model: RemoteExecutor, **kwargs: Any) -> ModelReply:
    return asyncio.run(model.generate(REQUEST, **kwargs))


def test_a_streamed_reply_arrives_piece_by_piece_with_usage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        usage = {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 2}}
        body = sse(text_chunk("Hel"), text_chunk("lo", "stop"), usage)
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    pieces: list[str] = []
    reply = run(executor(handler, monkeypatch), on_text=pieces.append)

    assert pieces == ["Hel", "lo"]
    assert (reply.message.content, reply.model, reply.finish_reason) == ("Hello", "remote", "stop")
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (12, 2)
    assert reply.timing.first_token_seconds > 0
    sent = seen[0]
    assert sent.url == "http://models.test/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert json.loads(sent.content)["model"] == "served-id"


@pytest.mark.parametrize(
    ("status", "body", "sentence"),
    [
        (401, {"error": {"message": f"Incorrect API key {KEY}"}}, "answered 401 Unauthorized"),
        (404, {"error": {"message": "model not found"}}, "404 Not Found: model not found"),
        (500, {"detail": "CUDA out of memory"}, "500 Internal Server Error: CUDA out of memory"),
        (503, {"error": "loading"}, "503 Service Unavailable: loading"),
    ],
)
def test_http_errors_are_sentences_without_the_key(
    monkeypatch: pytest.MonkeyPatch, status: int, body: dict[str, Any], sentence: str
) -> None:
    model = executor(lambda _: httpx.Response(status, json=body), monkeypatch)
    with pytest.raises(ModelError, match=sentence) as raised:
        run(model)
    assert KEY not in str(raised.value)


def test_a_silent_server_is_a_timeout_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    with pytest.raises(
        ModelError, match=r"sent nothing for 5 s \(waiting for its answer timed out\)"
    ):
        run(executor(handler, monkeypatch, timeout=5))


def test_an_unreachable_server_is_a_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    with pytest.raises(ModelError, match=r"could not be reached at http://models\.test/v1"):
        run(executor(handler, monkeypatch))


def test_a_stream_cut_before_the_reply_is_done_is_a_model_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = f"data: {json.dumps(text_chunk('Hel'))}\n\n".encode()
    model = executor(lambda _: httpx.Response(200, content=body), monkeypatch)
    with pytest.raises(ModelError, match="ended its stream before the reply was done"):
        run(model)


def test_a_missing_key_fails_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(200)

    model = executor(handler, monkeypatch)
    monkeypatch.delenv("TEST_REMOTE_KEY")
    with pytest.raises(ValueError, match="TEST_REMOTE_KEY, which is not set"):
        run(model)
    assert calls == []


def test_when_the_attempt_ends_the_stream_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = asyncio.Event()

    async def endless() -> AsyncIterator[bytes]:
        try:
            while True:
                yield f"data: {json.dumps(text_chunk('word '))}\n\n".encode()
                await asyncio.sleep(0.01)
        finally:
            closed.set()

    model = executor(lambda _: httpx.Response(200, content=endless()), monkeypatch)

    async def scenario() -> ModelReply:
        attempt_finished = asyncio.Event()
        call = asyncio.create_task(model.generate(REQUEST, attempt_finished.wait))
        await asyncio.sleep(0.1)
        attempt_finished.set()
        reply = await asyncio.wait_for(call, 1.0)
        await asyncio.wait_for(closed.wait(), 1.0)
        return reply

    reply = asyncio.run(scenario())
    assert reply.finish_reason == "cancelled"
    assert reply.message.content.startswith("word word")


def test_errors_show_neither_the_urls_credentials_nor_what_the_server_echoed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    said = f"no access for {KEY} to /srv/models/private.gguf (see https://u:pw@auth.test/?t=1)"

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.username == "user"  # the credentials still reach the server
        return httpx.Response(403, json={"error": {"message": said}})

    monkeypatch.setenv("TEST_REMOTE_KEY", KEY)
    settings = RemoteModel(
        "https://user:s3cret-pass@models.test/v1?token=q-secret", "m", api_key_env="TEST_REMOTE_KEY"
    )
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    with pytest.raises(ModelError) as raised:
        run(RemoteExecutor("remote", settings, client))
    sentence = str(raised.value)
    assert sentence.startswith("The model 'remote' at https://models.test/v1 answered 403")
    for secret in (KEY, "s3cret-pass", "q-secret", "pw@", "/srv/models"):
        assert secret not in sentence


def test_a_connection_failure_is_our_sentence_not_the_librarys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    with pytest.raises(ModelError) as raised:
        run(executor(handler, monkeypatch))
    assert str(raised.value).endswith(
        "it closed the connection mid-reply: the connection was refused or the host is unknown."
    )
    assert "Errno" not in str(raised.value)
    assert "ConnectError" not in str(raised.value)
