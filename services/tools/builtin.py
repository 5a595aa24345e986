"""Tools every deployment has."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from schemas.chat import ToolDefinition
from services.tools.base import FunctionTool, ToolContext, ToolError

_OPERATORS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        assert isinstance(node.value, int | float)
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise ToolError("exponents above 64 are not allowed")
        result: float | int = _OPERATORS[type(node.op)](left, right)
        return result
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        operand: float | int = _OPERATORS[type(node.op)](_evaluate(node.operand))
        return operand
    raise ToolError("only numbers and + - * / // % ** and parentheses are allowed")


def calculate(arguments: dict[str, Any], _context: ToolContext) -> str:
    expression = arguments.get("expression")
    if not isinstance(expression, str) or len(expression) > 200:
        raise ToolError("`expression` must be a string of at most 200 characters")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as error:
        raise ToolError(f"{expression!r} is not an arithmetic expression") from error
    try:
        return str(_evaluate(tree))
    except ZeroDivisionError as error:
        raise ToolError("division by zero") from error


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

BUILTIN_TOOLS = (CALCULATOR,)
