"""The policy pipeline every model and tool call crosses, in this order:

1. budget gates (cheapest first): rounds are the harness's; here turn tokens and turn
   wall time. Enforcement fails closed: when a gate cannot run, the call does not happen.
   Days of tokens (the agent's, the tenant's) are counted here but never end a turn:
   they are decided before a turn starts (`funding.py`).
2. grants and security checks, whichever harness made the call (`grants.py`): a model call
   showing a tool the spec does not let the model call ends the turn, a tool call the spec
   does not grant (or an `ask` tool's call no person approved) is refused; then a call's
   arguments are checked against the tool's JSON Schema.
   Results are capped by the tool registry.
3. observers: told about every recorded event, by the timeline (`observers.py`).

Pure: the driver hands in the journaled time and the ledger, and keeps what comes back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jsonschema
import msgspec

from schemas.chat import ToolCall, ToolDefinition
from schemas.harness import CallModel, TurnState
from schemas.model import ModelRequest, Usage
from schemas.spec import Limits
from schemas.state import Ledger
from services.agent.grants import PolicyError, call_problem, check_offered
from services.harness.children import token_limit


class BudgetExceededError(PolicyError):
    """A limit was reached; the message is the sentence that ends the turn."""


def total(usage: Usage) -> int:
    return usage.prompt_tokens + usage.completion_tokens


def estimate(request: ModelRequest, prompt_chars: int) -> int:
    """An upper-side guess of a call's tokens: about 3 characters a token of the prompt
    (as the harness measured it), plus the most it may write."""
    return prompt_chars // 3 + request.max_tokens


def needs_clock(limits: Limits) -> bool:
    """Whether a gate reads the time: only then does the driver pay for a clock read."""
    return bool(limits.max_turn_seconds or limits.max_daily_tokens)


@dataclass(frozen=True)
class TenantQuotas:
    """What a tenant's agents count together in its `TenantUsage` object. Off by default:
    the composition root turns them on (the in-memory context serves no such object)."""

    daily_tokens: int = 0
    """Model tokens the tenant's agents may use in a UTC day; 0: not counted."""
    agents: bool = False
    """Whether agents are counted, and spawns past the tenant's ceiling refused."""


LEASE_ROUNDS = 4
"""A wake asks the tenant for this many times the next step's estimate (a round asks
only when what the wake holds does not cover its step), but never holds more than one
estimate or `LEASE_SHARE` of the tenant's day, whichever is more: what running wakes
hold and will not use is what other wakes cannot have until they end."""
LEASE_SHARE = 100


@dataclass(frozen=True)
class Lease:
    """What a wake holds of its tenant's tokens of a day: lent, and used by its steps."""

    day: str = ""
    granted: int = 0
    spent: int = 0

    @property
    def left(self) -> int:
        return self.granted - self.spent

    def wants(self, day: str, need: int, limit: int) -> int:
        """Tokens to ask for before a step estimated at `need` on `day` (0: none)."""
        if day == self.day and self.left >= need:
            return 0
        return min(LEASE_ROUNDS * need, max(need, limit // LEASE_SHARE))

    def grown(self, day: str, tokens: int) -> Lease:
        return Lease(day, self.granted + tokens, self.spent)

    def used(self, tokens: int) -> Lease:
        return Lease(self.day, self.granted, self.spent + tokens)


def day_of(at: float) -> str:
    """The UTC day of `at` (unix seconds), `YYYY-MM-DD`."""
    return datetime.fromtimestamp(at, UTC).date().isoformat()


class Pipeline:
    def __init__(self, tools: Sequence[ToolDefinition]) -> None:
        self._tools = {tool.name: tool for tool in tools}
        self._checkers: dict[str, ArgumentChecker] = {}

    def before_model(
        self, turn: TurnState, ledger: Ledger, call: CallModel, now: float, spent: float
    ) -> Ledger:
        """Check every budget and reserve the call's estimate; raises BudgetExceededError.

        `now` is the journaled time and `spent` the turn's running seconds (both only
        read when a limit needs them). A request showing a tool the model may not call
        raises PolicyError."""
        limits = turn.spec.limits
        check_time(turn, spent)
        check_offered(turn.spec, call.request, turn.page_tools)
        used, most = total(turn.usage), token_limit(turn)
        if most and used >= most:
            share = "" if most == limits.max_turn_tokens else " (its share of its composition's)"
            raise BudgetExceededError(
                f"The turn reached its limit of {most} model tokens{share} (it used {used})."
            )
        if limits.max_daily_tokens:
            ledger = _today(ledger, now)  # counted: a day used refuses the next turn
        return msgspec.structs.replace(ledger, reserved=estimate(call.request, call.prompt_chars))

    def before_tool(self, turn: TurnState, call: ToolCall, spent: float) -> str | None:
        """Check the wall-time budget (raises), then the grant and the arguments: a
        sentence if the spec does not let the call run now or they are not what the tool
        accepts."""
        check_time(turn, spent)
        if (refused := call_problem(turn, call)) is not None:
            return refused
        checker = self._checker_of(call.name)
        return None if checker is None else checker.problem(call.name, call.arguments)

    def _checker_of(self, name: str) -> ArgumentChecker | None:
        if (checker := self._checkers.get(name)) is None:
            tool = self._tools.get(name)
            if tool is None:
                return None
            checker = ArgumentChecker(tool.parameters)
            self._checkers[name] = checker
        return checker


class ArgumentChecker:
    """A tool's JSON Schema (formats unchecked, no schema fetched); a call's arguments that
    do not fit get the sentence of jsonschema's best match of the errors."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self._validator: jsonschema.protocols.Validator = jsonschema.validators.validator_for(
            schema
        )(schema)

    def problem(self, name: str, arguments: dict[str, Any]) -> str | None:
        """A sentence if `arguments` do not fit, else None."""
        error = jsonschema.exceptions.best_match(self._validator.iter_errors(arguments))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path) or "the arguments"
        return f"The arguments of {name} are not valid: {where}: {error.message}."


def after_model(ledger: Ledger, usage: Usage, at: float) -> Ledger:
    """Replace the reservation by what the call used, on the day of `at` (the time the
    call finished)."""
    ledger = _today(ledger, at)
    return msgspec.structs.replace(ledger, day_tokens=ledger.day_tokens + total(usage), reserved=0)


def check_time(turn: TurnState, spent: float) -> None:
    limit = turn.spec.limits.max_turn_seconds
    if limit and spent > limit:
        raise BudgetExceededError(
            f"The turn reached its limit of {limit:g} seconds of running time."
        )


def _today(ledger: Ledger, now: float) -> Ledger:
    day = day_of(now)
    return ledger if ledger.day == day else Ledger(day=day)
