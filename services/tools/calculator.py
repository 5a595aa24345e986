"""The built-in calculator: arithmetic on numbers, bounded before it computes.

Every operation's size is estimated from its operands before it runs (a power's digits
from its base and exponent, a product's from its factors), and anything that would pass
`MAX_DIGITS` is refused with a sentence, so no expression can hold the interpreter (big
integer arithmetic holds the GIL for as long as it runs) or fail inside Python's own
integer-to-text conversion.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

from schemas.chat import ToolDefinition
from services.tools.base import FunctionTool, ToolContext, ToolError

MAX_DIGITS = 3000
"""Exact integer results (and every integer along the way) have at most this many digits."""
MAX_CHARACTERS = 200
_LIMIT = 10**MAX_DIGITS

Number = int | float

_OPERATORS: dict[type, Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Number], Number]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//"}
_SYMBOLS |= {ast.Mod: "%", ast.Pow: "**"}

TOO_LARGE_FLOAT = "a value in it is too large for floating-point arithmetic (about 1.8e308 at most)"


class _RefusedError(ToolError):
    """Why the expression was not computed; completed into a sentence by `calculate`."""


def _digits(log10: float) -> int:
    """The number of digits of a value whose magnitude has this logarithm."""
    return math.floor(log10) + 1 if log10 > 0 else 1


def _too_many(digits: int, what: str) -> _RefusedError:
    return _RefusedError(
        f"{what} would have about {digits:,} digits, and the calculator gives integers "
        f"of at most {MAX_DIGITS:,} digits"
    )


def _check_power(base: Number, exponent: Number) -> None:
    """Refuse an integer power whose result would be too long, without computing it."""
    if not (isinstance(base, int) and isinstance(exponent, int)) or exponent <= 0:
        return
    if abs(base) <= 1:
        return
    if exponent > 10 * MAX_DIGITS:
        raise _RefusedError(
            f"a power with an exponent of {_digits(math.log10(exponent)):,} digits would have more "
            f"than {MAX_DIGITS:,} digits, the most the calculator gives"
        )
    digits = _digits(exponent * math.log10(abs(base)))
    if digits > MAX_DIGITS + 1:  # one digit of slack for rounding; the result is checked too
        raise _too_many(digits, "a power in it")


def _check_product(left: Number, right: Number) -> None:
    if isinstance(left, int) and isinstance(right, int) and left and right:
        digits = _digits(math.log10(abs(left)) + math.log10(abs(right)))
        if digits > MAX_DIGITS + 1:
            raise _too_many(digits, "a product in it")


def _checked(value: Number | complex) -> Number:
    """`value`, if it is a real number of the allowed size."""
    if isinstance(value, complex):
        raise _RefusedError(
            "its result is not a real number (a negative number to a fractional power)"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise _RefusedError(TOO_LARGE_FLOAT)
    if isinstance(value, int) and abs(value) >= _LIMIT:
        raise _too_many(_digits(math.log10(abs(value))), "a value in it")
    return value


def _binary(node: ast.BinOp) -> Number:
    left, right = _evaluate(node.left), _evaluate(node.right)
    if isinstance(node.op, ast.Pow):
        _check_power(left, right)
    elif isinstance(node.op, ast.Mult):
        _check_product(left, right)
    try:
        result: Number | complex = _OPERATORS[type(node.op)](left, right)
    except ZeroDivisionError:
        raise _RefusedError(f"it divides by zero (with {_SYMBOLS[type(node.op)]})") from None
    except OverflowError:
        raise _RefusedError(TOO_LARGE_FLOAT) from None
    return _checked(result)


def _evaluate(node: ast.AST) -> Number:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        assert isinstance(node.value, int | float)
        return _checked(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _binary(node)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    raise _RefusedError("only numbers, + - * / // % ** and parentheses are allowed")


def evaluate(expression: str) -> Number:
    """The value of an arithmetic expression; `ToolError` with a sentence otherwise."""
    try:
        tree = ast.parse(expression, mode="eval")
    except (SyntaxError, ValueError):
        raise ToolError(f"{expression!r} is not an arithmetic expression.") from None
    try:
        return _evaluate(tree.body)
    except _RefusedError as refused:
        raise ToolError(f"{expression!r} was not computed: {refused}.") from None
    except RecursionError:
        raise ToolError(f"{expression!r} is nested too deeply to compute.") from None


def calculate(arguments: dict[str, object], _context: ToolContext) -> str:
    expression = arguments.get("expression")
    if not isinstance(expression, str) or len(expression) > MAX_CHARACTERS:
        raise ToolError(f"`expression` must be a string of at most {MAX_CHARACTERS} characters.")
    return str(evaluate(expression))


CALCULATOR = FunctionTool(
    definition=ToolDefinition(
        name="calculator",
        description="Evaluate an arithmetic expression such as `(2 + 3) * 4`.",
        parameters={
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    ),
    function=calculate,
)
