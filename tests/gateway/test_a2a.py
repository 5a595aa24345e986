"""teaspill's kinds as A2A agents, on a real stack: the `a2a-sdk`'s own client against the
gateway's `/a2a`, with the gateway's API keys."""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import (
    InvalidParamsError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
)

from schemas.events import ToolFinished, TurnEnded, TurnStarted
from schemas.live import LiveDelta
from services.executor.scripted import script
from services.keys import new_key
from tests.durable.conftest import eventually
from tests.gateway.test_stack import CALCULATE, CREATED, SLOW, GatewayStack, gateway_stack, made_key

pytestmark = pytest.mark.durable

T = TypeVar("T")
WORKING = TaskState.TASK_STATE_WORKING
COMPLETED = TaskState.TASK_STATE_COMPLETED
CANCELED = TaskState.TASK_STATE_CANCELED


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with gateway_stack(tmp_path_factory.mktemp("a2a-home")) as stack:
        yield stack


@pytest.fixture(scope="module")
def beta(gw: GatewayStack) -> str:
    """A key of tenant beta, which has published its kind `private` beside acme's `calc`."""
    key = made_key(gw.settings, gw.http, "beta", "admin")
    spec = {"kind": "private", "instructions": "Be brief.", "model": "script"}
    published = gw.http.post("/v1/specs", json=spec, headers={"Authorization": f"Bearer {key}"})
    assert published.status_code == 201, published.text
    auth = {"Authorization": f"Bearer {key}"}
    eventually(
        lambda: gw.http.get("/a2a", headers=auth).json()["agents"] or None,
        60,
        "the spec to reach the projection",
    )
    return key


def _run(gw: GatewayStack, work: Callable[[Client], Awaitable[T]], **options: Any) -> T:
    """`work` with an SDK client made from the `calc` card, as `options` configure it."""

    async def run() -> T:
        async with _client(gw, **options) as client:
            return await work(client)

    return asyncio.run(run())


@asynccontextmanager
async def _client(
    gw: GatewayStack, *, key: str | None = None, kind: str = "calc", streaming: bool = False
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key or gw.key}"}
    async with httpx.AsyncClient(headers=headers, timeout=120) as http:
        config = ClientConfig(httpx_client=http, streaming=streaming)
        client = await ClientFactory(config).create_from_url(f"{gw.gateway.url}/a2a/{kind}")
        try:
            yield client
        finally:
            await client.close()


_ids = itertools.count()


def _message(
    text: str, context: str = "", message_id: str = "", **config: Any
) -> SendMessageRequest:
    message = Message(
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        context_id=context,
        message_id=message_id or f"test-message-{next(_ids)}-{secrets.token_hex(4)}",
    )
    return SendMessageRequest(message=message, configuration=SendMessageConfiguration(**config))


async def _send(
    client: Client, text: str, context: str = "", message_id: str = "", **config: Any
) -> Task:
    request = _message(text, context, message_id, **config)
    responses = [r async for r in client.send_message(request)]
    assert len(responses) == 1
    assert responses[0].HasField("task"), responses[0]
    return responses[0].task


def _streamed(
    gw: GatewayStack, text: str, meanwhile: Callable[[str], None]
) -> list[StreamResponse]:
    """The stream of a message's turn; `meanwhile(address)` runs (in a thread, while the
    stream is read on) once the task has come."""

    async def stream(client: Client) -> list[StreamResponse]:
        seen: list[StreamResponse] = []
        async for response in client.send_message(_message(text)):
            seen.append(response)
            if response.HasField("task"):
                await asyncio.to_thread(meanwhile, response.task.context_id)
        return seen

    return _run(gw, stream, streaming=True)


def _text(task: Task) -> str:
    return "".join(part.text for part in task.status.message.parts)


def test_the_card_names_the_kind_its_endpoint_and_the_key_scheme(gw: GatewayStack) -> None:
    async def card() -> Any:
        async with httpx.AsyncClient(headers=gw.auth, timeout=30) as http:
            return await A2ACardResolver(http, f"{gw.gateway.url}/a2a/calc").get_agent_card()

    found = asyncio.run(card())
    assert found.name == "calc"
    assert found.version == "1"
    assert found.capabilities.streaming
    urls = {(i.url, i.protocol_version) for i in found.supported_interfaces}
    assert urls == {(f"{gw.gateway.url}/a2a/calc", "1.0"), (f"{gw.gateway.url}/a2a/calc", "0.3")}
    scheme = found.security_schemes["apiKey"].http_auth_security_scheme
    assert scheme.scheme == "bearer"
    assert [list(r.schemes) for r in found.security_requirements] == [["apiKey"]]


def test_a_message_gets_the_turns_reply_and_the_context_continues(gw: GatewayStack) -> None:
    async def talk(client: Client) -> tuple[Task, Task, Task]:
        first = await _send(client, CALCULATE)
        again = await _send(client, script({"reply": "still here"}), first.context_id, "same")
        repeated = await _send(client, script({"reply": "still here"}), first.context_id, "same")
        return first, again, repeated

    first, again, repeated = _run(gw, talk)
    assert repeated == again, "a message sent again with its id is the same task"
    assert first.status.state == COMPLETED
    assert _text(first) == "It is 42"
    assert first.artifacts[-1].parts[0].text == "It is 42"
    assert first.history[0].parts[0].text == CALCULATE
    address = first.context_id
    assert address.startswith("acme.a2a-calc-")
    assert first.id.startswith(f"{address}/m")
    assert (again.context_id, _text(again)) == (address, "still here")
    assert again.id.startswith(f"{address}/m")
    assert again.id != first.id
    ended = [e for e in gw.timeline(address) if isinstance(e.body, TurnEnded)]
    assert [e.body.reply for e in ended if isinstance(e.body, TurnEnded)] == [
        "It is 42",
        "still here",
    ]


def test_a_stream_gives_the_text_as_it_is_written_before_the_final_status(
    gw: GatewayStack,
) -> None:
    seen = _streamed(gw, SLOW, lambda address: _live(gw, address))
    kinds = [r.WhichOneof("payload") for r in seen]
    states = [r.status_update.status.state for r in seen if r.HasField("status_update")]
    assert kinds[0] == "task"
    assert seen[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
    assert states == [WORKING, COMPLETED]
    chunks = [r.artifact_update for r in seen if r.HasField("artifact_update")]
    assert [(c.artifact.parts[0].text, c.append, c.last_chunk) for c in chunks] == [
        ("It ", False, False),
        ("is", True, False),
        (" 42", True, True),
    ]
    assert kinds[-1] == "status_update"
    assert seen[-1].status_update.status.state == COMPLETED
    assert kinds == ["task", "status_update", *["artifact_update"] * 3, "status_update"]


def _live(gw: GatewayStack, address: str) -> None:
    """Text of the reply's round pushed as the executor pushes it, while the round sleeps."""
    events = gw.wait_for(address, "tool_finished")
    finished = next(e for e in events if isinstance(e.body, ToolFinished))
    turn, round_ = finished.turn, finished.round + 1
    gw.live(LiveDelta(address, turn, round_, "a1", 0, "It "))
    gw.live(LiveDelta(address, turn, round_, "a1", 0, "It is"))


def test_a_task_is_read_and_cancelled_by_its_id(gw: GatewayStack) -> None:
    """A message sent while a turn runs waits in the agent's inbox: it is answered
    submitted, and is a task once the agent takes it. Cancelling the running task stops its
    turn; the waiting one then runs, as a subscriber to it sees."""
    slow = script({"sleep": 60.0, "reply": "too late"})

    async def cancel(client: Client) -> tuple[list[Task], list[StreamResponse]]:
        started = await _send(client, slow, return_immediately=True)
        queued = await _send(client, "next", started.context_id, return_immediately=True)
        read = await client.get_task(GetTaskRequest(id=started.id))
        with pytest.raises(TaskNotFoundError, match="one sent while a turn runs is named"):
            await client.get_task(GetTaskRequest(id=queued.id))
        cancelled = await client.cancel_task(CancelTaskRequest(id=started.id))
        after = await client.get_task(GetTaskRequest(id=started.id))
        with pytest.raises(TaskNotCancelableError, match=f"task {started.id} has ended"):
            await client.cancel_task(CancelTaskRequest(id=started.id))
        await asyncio.to_thread(_turns_started, gw, started.context_id, 2)
        async with _client(gw, streaming=True) as streaming:
            subscribed = streaming.subscribe(SubscribeToTaskRequest(id=queued.id))
            followed = [response async for response in subscribed]
        return [started, queued, read, cancelled, after], followed

    tasks, followed = _run(gw, cancel)
    started, queued, read, cancelled, after = tasks
    assert started.status.state == WORKING
    assert queued.status.state == TaskState.TASK_STATE_SUBMITTED
    assert queued.id.startswith(f"{started.context_id}/m")
    assert (read.id, read.status.state) == (started.id, WORKING)
    assert cancelled.status.state == CANCELED
    assert after.status.state == CANCELED
    assert followed[0].task.id == queued.id
    last = followed[-1]
    final = last.task.status if last.HasField("task") else last.status_update.status
    assert final.state == COMPLETED
    assert "".join(part.text for part in final.message.parts) == "You said: next"
    ended = [e.body for e in gw.timeline(started.context_id) if isinstance(e.body, TurnEnded)]
    assert [e.outcome for e in ended] == ["stopped", "succeeded"]


def _turns_started(gw: GatewayStack, address: str, count: int) -> None:
    eventually(
        lambda: sum(isinstance(e.body, TurnStarted) for e in gw.timeline(address)) >= count or None,
        60,
        f"{count} turns of {address} to start",
    )


def _text_of(response: StreamResponse) -> str:
    return "".join(part.text for part in response.status_update.status.message.parts)


def test_a_key_sees_only_its_own_tenants_kinds_agents_and_tasks(
    gw: GatewayStack, beta: str
) -> None:
    listed = gw.http.get("/a2a", headers=gw.auth)
    assert [a["kind"] for a in listed.json()["agents"]] == ["calc"]
    listed = gw.http.get("/a2a", headers={"Authorization": f"Bearer {beta}"})
    assert [a["kind"] for a in listed.json()["agents"]] == ["private"]
    theirs = gw.http.get("/a2a/private/.well-known/agent-card.json", headers=gw.auth)
    assert theirs.status_code == 404
    assert "no spec of kind 'private'" in theirs.json()["error"]["message"]

    task = _run(gw, lambda client: _send(client, CALCULATE))

    async def pry(client: Client) -> None:
        with pytest.raises(TaskNotFoundError, match=f"there is no task {task.id}"):
            await client.get_task(GetTaskRequest(id=task.id))
        with pytest.raises(TaskNotFoundError):
            await client.cancel_task(CancelTaskRequest(id=task.id))
        with pytest.raises(InvalidParamsError, match=f"there is no agent {task.context_id}"):
            await _send(client, "hello", task.context_id)

    _run(gw, pry, key=beta, kind="private")


def test_a_read_key_reads_tasks_but_cannot_send(gw: GatewayStack) -> None:
    reader = made_key(gw.settings, gw.http, "acme", "read")
    task = _run(gw, lambda client: _send(client, CALCULATE))

    async def read(client: Client) -> Task:
        with pytest.raises(InvalidRequestError, match="needs a write key; this key is read"):
            await _send(client, "hello")
        return await client.get_task(GetTaskRequest(id=task.id))

    assert _run(gw, read, key=reader).status.state == COMPLETED


UNKNOWN = new_key("acme", "admin", CREATED)[0]


@pytest.mark.parametrize(
    ("header", "says"),
    [(None, "missing API key"), (f"Bearer {UNKNOWN}", "unknown API key")],
    ids=["none", "unknown"],
)
@pytest.mark.parametrize("path", ["/a2a", "/a2a/calc/.well-known/agent-card.json", "/a2a/calc"])
def test_a_wrong_key_gets_401(gw: GatewayStack, path: str, header: str | None, says: str) -> None:
    headers = {"Authorization": header} if header else {}
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "acme.x/m1"}}
    if path == "/a2a/calc":
        response = gw.http.post(path, json=body, headers=headers)
    else:
        response = gw.http.get(path, headers=headers)
    assert response.status_code == 401, response.text
    assert response.json()["error"]["message"].startswith(says)


def test_the_v0_3_method_names_are_answered(gw: GatewayStack) -> None:
    text = {"kind": "text", "text": script({"reply": "old names"})}
    message = {"role": "user", "parts": [text], "messageId": "v03-message", "kind": "message"}
    sent = _rpc(gw, "message/send", {"message": message})
    assert sent["status"]["state"] == "completed"
    got = _rpc(gw, "tasks/get", {"id": sent["id"]})
    assert (got["id"], got["contextId"]) == (sent["id"], sent["contextId"])
    assert got["status"]["message"]["parts"][0]["text"] == "old names"


def _rpc(gw: GatewayStack, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = gw.http.post("/a2a/calc", json=body, headers=gw.auth, timeout=120)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


def test_a_task_in_flight_survives_a_sigkill_of_the_endpoint(gw: GatewayStack) -> None:
    """The stream goes on across the restart; then the task is read from a gateway that
    was killed too, so nothing of it was in a gateway's memory."""

    seen = _streamed(gw, SLOW, lambda address: _kill_during_the_slow_round(gw, address))
    task = seen[0].task
    assert seen[-1].status_update.status.state == COMPLETED
    assert _text_of(seen[-1]) == "It is 42"
    gw.gateway.kill()
    gw.gateway.start()
    eventually(lambda: gw.http.get("/v1/health").status_code == 200 or None, 60, "the gateway")

    read = _run(gw, lambda client: client.get_task(GetTaskRequest(id=task.id)))
    assert (read.status.state, _text(read)) == (COMPLETED, "It is 42")
    ended = [e.body for e in gw.timeline(task.context_id) if isinstance(e.body, TurnEnded)]
    assert [e.outcome for e in ended] == ["succeeded"]


def _kill_during_the_slow_round(gw: GatewayStack, address: str) -> None:
    gw.wait_for(address, "tool_finished")
    gw.endpoint.kill()
    gw.endpoint.start()
