"""Agent spec files: TOML or JSON, decoded into `AgentSpec` with sentences for errors."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import msgspec

from schemas.spec import AgentSpec


class SpecError(ValueError):
    pass


def load_spec(path: Path) -> AgentSpec:
    try:
        text = path.read_text()
    except OSError as error:
        raise SpecError(f"Cannot read the spec file {path}: {error.strerror}.") from error
    raw = _parse(path, text)
    try:
        return msgspec.convert(raw, type=AgentSpec)
    except msgspec.ValidationError as error:
        raise SpecError(f"The spec in {path} is not valid: {error}.") from error


def _parse(path: Path, text: str) -> Any:
    try:
        if path.suffix == ".json":
            return json.loads(text)
        return tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as error:
        kind = "JSON" if path.suffix == ".json" else "TOML"
        raise SpecError(f"The spec file {path} is not valid {kind}: {error}.") from error
