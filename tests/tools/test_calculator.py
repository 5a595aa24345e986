"""The calculator: arithmetic, and refusals measured before anything is computed."""

from __future__ import annotations

import time

import pytest

from services.tools.base import ToolError
from services.tools.calculator import MAX_DIGITS, evaluate


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("(2 + 3) * 4", 20),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-7 % 3", 2),
        ("2 ** -2", 0.25),
        ("2 ** 1000", 2**1000),
        ("1 ** (10 ** 150)", 1),
        ("(-1) ** (10 ** 150 + 1)", -1),
        ("0.5 ** (10 ** 150)", 0.0),
        ("1e300 * 1e-300", 1e300 * 1e-300),
    ],
)
def test_arithmetic_within_the_limits_is_computed(expression: str, value: float) -> None:
    assert evaluate(expression) == value


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("(((9**64)**64)**64)**64", "a power in it would have about 3,909 digits"),
        ("9**9**9", f"an exponent of 9 digits would have more than {MAX_DIGITS:,}"),
        ("2 ** (10 ** 100)", f"more than {MAX_DIGITS:,} digits"),
        ("(10**150)**19 * 10**300", "a product in it would have about 3,151 digits"),
        ("(10**150)**20", "would have about 3,001 digits"),
        ("10**2999 * 10**10 + 1", "a product in it"),
        ("1e309", "too large for floating-point"),
        ("1e300 * 1e300", "too large for floating-point"),
        ("1.5 ** 100000", "too large for floating-point"),
        ("10 ** 400 / 3", "too large for floating-point"),
        ("2 ** -(10 ** 400)", "too large for floating-point"),
        ("(-8) ** 0.5", "not a real number"),
        ("1 / 0", "divides by zero (with /)"),
        ("5 % 0", "divides by zero (with %)"),
        ("__import__('os')", "only numbers"),
        ("2 +", "is not an arithmetic expression"),
        ("1 if 1 else 2", "only numbers"),
    ],
)
def test_what_is_refused_says_why_in_a_sentence(expression: str, says: str) -> None:
    with pytest.raises(ToolError) as refused:
        evaluate(expression)
    sentence = str(refused.value)
    assert says in sentence
    assert sentence.startswith(repr(expression))
    assert sentence.endswith(".")
    for internal in ("Error", "Exceeds the limit", "sys.set_int_max_str_digits", "errno"):
        assert internal not in sentence


def test_a_power_tower_is_refused_at_once() -> None:
    started = time.perf_counter()
    for tower in ("(((9**64)**64)**64)**64", "((((9**64)**64)**64)**64)**64", "9**9**9**9"):
        with pytest.raises(ToolError):
            evaluate(tower)
    assert time.perf_counter() - started < 0.1


def test_the_largest_results_allowed_are_quick_and_printable() -> None:
    started = time.perf_counter()
    largest = evaluate(f"10 ** {MAX_DIGITS - 1} * 9 + (10 ** {MAX_DIGITS - 1} - 1)")
    assert isinstance(largest, int)
    assert len(str(largest)) == MAX_DIGITS
    assert time.perf_counter() - started < 0.1
    with pytest.raises(ToolError, match="a value in it would have"):
        evaluate(f"10 ** {MAX_DIGITS - 1} * 9 + 10 ** {MAX_DIGITS - 1}")
