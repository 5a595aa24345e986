"""The plain loop: the rounds of a turn as a bare Restate virtual object, to compare with.

The same work as a teaspill round, and nothing around it: one `ctx.run` step per model
call, running the same `script` executor on the same kind of worker thread as the `Model`
service, and one `ctx.run` step per tool call, through the same tool registry (the
built-in `calculator`). The conversation is kept in object state, read once and written
once per turn. No timeline, no projection, no policy, no events.

Served by its own endpoint, registered on the same restate-server as teaspill's:

    python -m hypercorn 'bench.plain:create_app()'
"""

from __future__ import annotations

import asyncio

import msgspec
import restate

from schemas.chat import ChatMessage, ToolCall
from schemas.harness import ToolResult
from schemas.model import ModelReply, ModelRequest
from services.effects.ledger import MemoryLedger
from services.executor.registry import ModelRegistry, default_models
from services.lifespan import ASGIApp, with_shutdown
from services.settings import settings
from services.tools.registry import ToolRegistry, load_tools

SERVICE = "PlainLoop"
HANDLER = "turn"
MODEL = "script"
HISTORY = "history"
INSTRUCTIONS = "Follow the script."


class PlainTurn(msgspec.Struct, frozen=True):
    """One user message: for the `script` model, a script of one line per round."""

    message: str
    max_rounds: int


class PlainReply(msgspec.Struct, frozen=True):
    reply: str
    rounds: int
    results: tuple[str, ...] = ()
    """The tool results of the turn, in order."""


class History(msgspec.Struct, frozen=True):
    messages: tuple[ChatMessage, ...] = ()


def plain_object(models: ModelRegistry, tools: ToolRegistry) -> restate.VirtualObject:
    loop = restate.VirtualObject(SERVICE, description="A bare agent loop, for benchmarks.")
    definitions = tools.definitions()
    system = ChatMessage(role="system", content=INSTRUCTIONS)

    async def generate(request: ModelRequest) -> ModelReply:
        return await models.runner(request.model).generate(request)

    @loop.handler(HANDLER)
    async def turn(ctx: restate.ObjectContext, request: PlainTurn) -> PlainReply:
        history = await ctx.get(HISTORY, type_hint=History) or History()
        messages = [*history.messages, ChatMessage(role="user", content=request.message)]
        turn_number = sum(1 for m in history.messages if m.role == "user") + 1
        results: list[str] = []
        for round_ in range(1, request.max_rounds + 1):
            model_request = ModelRequest(
                MODEL, (system, *messages), definitions, agent=ctx.key(), round=round_
            )
            reply = await ctx.run_typed(
                "model", generate, restate.RunOptions(type_hint=ModelReply), model_request
            )
            messages.append(reply.message)
            if not reply.message.tool_calls:
                ctx.set(HISTORY, History(tuple(messages)))
                return PlainReply(reply.message.content, round_, tuple(results))
            for call in reply.message.tool_calls:
                key = f"{ctx.key()}/{turn_number}/{round_}/{call.id}"
                result = await _tool_step(ctx, tools, call, key)
                results.append(result.content)
                messages.append(_tool_message(result))
        raise restate.TerminalError(f"The turn did not end within {request.max_rounds} rounds.")

    return loop


async def _tool_step(
    ctx: restate.ObjectContext, tools: ToolRegistry, call: ToolCall, key: str
) -> ToolResult:
    return await ctx.run_typed(
        f"tool {call.name} {call.id}",
        tools.run,
        restate.RunOptions(type_hint=ToolResult),
        call,
        key,
        ctx.key(),
    )


def _tool_message(result: ToolResult) -> ChatMessage:
    return ChatMessage(
        role="tool", content=result.content, tool_call_id=result.call_id, name=result.name
    )


def create_app() -> ASGIApp:
    config = settings()
    models = default_models(config)
    tools = load_tools(config.home, config.tool_modules, MemoryLedger())  # calculator only
    app: ASGIApp = restate.app([plain_object(models, tools)])
    return with_shutdown(app, [lambda: asyncio.to_thread(models.close)])
