"""The policy pipeline every model and tool call crosses, in this order:

1. budget gates (cheapest first): rounds are the harness's; here turn tokens, turn wall
   time and the agent's daily tokens. Enforcement fails closed: when a gate cannot run,
   the call does not happen.
2. grants and security checks: ungranted tools never reach this point (the harness
   refuses them); here a call's arguments are checked against the tool's JSON Schema.
   Results are capped by the tool registry.
3. observers: told about every recorded event, by the timeline (`observers.py`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import UTC, datetime

import jsonschema
import msgspec
import restate

from schemas.chat import ToolCall, ToolDefinition
from schemas.harness import TurnState
from schemas.model import ModelRequest, Usage
from schemas.state import Ledger
from services.agent.state import LEDGER


class BudgetExceededError(Exception):
    """A limit was reached; the message is the sentence that ends the turn."""


def total(usage: Usage) -> int:
    return usage.prompt_tokens + usage.completion_tokens


def estimate(request: ModelRequest) -> int:
    """An upper-side guess of a call's tokens: about 3 characters a token, plus the most
    it may write."""
    return sum(len(m.content) for m in request.messages) // 3 + request.max_tokens


class Pipeline:
    def __init__(
        self,
        ctx: restate.ObjectContext,
        tools: Sequence[ToolDefinition],
        wake_started: float,
    ) -> None:
        self._ctx = ctx
        self._tools = {tool.name: tool for tool in tools}
        self._wake_started = wake_started

    async def before_model(self, turn: TurnState, request: ModelRequest) -> None:
        """Check every budget and reserve the call's estimate; raises BudgetExceededError.

        The clock is read (a journaled step) only for a limit that needs it."""
        limits = turn.spec.limits
        await self._check_time(turn)
        used = total(turn.usage)
        if limits.max_turn_tokens and used >= limits.max_turn_tokens:
            raise BudgetExceededError(
                f"The turn reached its limit of {limits.max_turn_tokens} model tokens "
                f"(it used {used})."
            )
        ledger = await self._ledger()
        if limits.max_daily_tokens:
            ledger = _today(ledger, await self._ctx.time())
            if ledger.day_tokens >= limits.max_daily_tokens:
                raise BudgetExceededError(
                    f"The agent reached its limit of {limits.max_daily_tokens} model tokens "
                    f"for {ledger.day} (UTC)."
                )
        self._ctx.set(LEDGER, msgspec.structs.replace(ledger, reserved=estimate(request)))

    async def after_model(self, usage: Usage, at: float) -> None:
        """Replace the reservation by what the call used, on the day of `at` (the time
        the call was recorded)."""
        ledger = _today(await self._ledger(), at)
        charged = ledger.day_tokens + total(usage)
        self._ctx.set(LEDGER, msgspec.structs.replace(ledger, day_tokens=charged, reserved=0))

    async def before_tool(self, turn: TurnState, call: ToolCall) -> str | None:
        """Check the wall-time budget (raises), then the arguments: a sentence if they are
        not what the tool accepts."""
        await self._check_time(turn)
        tool = self._tools.get(call.name)
        if tool is None:
            return None
        validator = _validator(msgspec.json.encode(tool.parameters, order="sorted"))
        error = jsonschema.exceptions.best_match(validator.iter_errors(call.arguments))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path) or "the arguments"
        return f"The arguments of {call.name} are not valid: {where}: {error.message}."

    async def _check_time(self, turn: TurnState) -> None:
        limit = turn.spec.limits.max_turn_seconds
        if not limit:
            return
        spent = turn.active_seconds + (await self._ctx.time() - self._wake_started)
        if spent > limit:
            raise BudgetExceededError(
                f"The turn reached its limit of {limit:g} seconds of running time."
            )

    async def _ledger(self) -> Ledger:
        try:
            return await self._ctx.get(LEDGER, type_hint=Ledger) or Ledger()
        except (msgspec.DecodeError, TypeError, ValueError) as error:
            raise BudgetExceededError(
                "The budget ledger could not be read, so no model call is made."
            ) from error


@functools.cache
def _validator(schema_json: bytes) -> jsonschema.protocols.Validator:
    """Built once per schema: checking the schema itself on every call costs more than
    the call's own check."""
    schema = msgspec.json.decode(schema_json)
    validator: jsonschema.protocols.Validator = jsonschema.validators.validator_for(schema)(schema)
    return validator


def _today(ledger: Ledger, now: float) -> Ledger:
    day = datetime.fromtimestamp(now, UTC).date().isoformat()
    return ledger if ledger.day == day else Ledger(day=day)
