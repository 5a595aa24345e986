"""Tools every deployment has."""

from __future__ import annotations

from services.tools.calculator import CALCULATOR

BUILTIN_TOOLS = (CALCULATOR,)

__all__ = ["BUILTIN_TOOLS", "CALCULATOR"]
