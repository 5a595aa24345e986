"""Checks the configuration before anything starts: the plugin modules the settings name
and the model file. Each problem is a `ConfigError` with one sentence, so `teaspill up`
stops before it starts a part, and an endpoint started by hand exits saying why."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from services.mcp.config import load_servers
from services.settings import ConfigError, Settings

PLUGINS = (
    ("tool_modules", "TOOLS", "control"),
    ("observer_modules", "OBSERVERS", "control"),
    ("harness_modules", "HARNESSES", "control"),
    ("model_modules", "MODELS", "execution"),
)
"""Each plugin setting, the name its modules define, and the plane that loads them."""


def plugin(module: str, attribute: str, setting: str) -> Any:
    """`module.attribute`, for a module named by `setting` (e.g. TEASPILL_TOOL_MODULES)."""
    try:
        loaded = importlib.import_module(module)
    except ImportError as error:
        raise ConfigError(
            f"{setting} names {module}, which cannot be imported ({error}): put it on "
            "PYTHONPATH or in the directory the service runs from."
        ) from None
    except Exception as error:  # noqa: BLE001 - any failure of a user's module is a sentence
        raise ConfigError(
            f"{setting} names {module}, which fails when imported: {type(error).__name__}: {error}."
        ) from None
    if not hasattr(loaded, attribute):
        raise ConfigError(f"{setting} names {module}, which defines no {attribute}.")
    return getattr(loaded, attribute)


def model_file(settings: Settings) -> Path:
    """The GGUF file the `smollm2` model loads: TEASPILL_MODEL_PATH, else the bundled one."""
    if settings.model_path is None:
        from services.executor.llama import bundled_model_path  # noqa: PLC0415 - llama.cpp

        try:
            return bundled_model_path()
        except FileNotFoundError as error:
            raise ConfigError(str(error)) from None
    if not settings.model_path.is_file():
        raise ConfigError(
            f"TEASPILL_MODEL_PATH={settings.model_path} is not a file: point it at a GGUF "
            "model, or unset it to use the bundled SmolLM2."
        )
    return settings.model_path


def check(settings: Settings, *, control: bool = True, execution: bool = True) -> None:
    """Everything a plane needs from the configuration, before it serves anything."""
    planes = {"control": control, "execution": execution}
    for field, attribute, plane in PLUGINS:
        for module in getattr(settings, field) if planes[plane] else ():
            plugin(module, attribute, f"TEASPILL_{field.upper()}")
    if execution:
        model_file(settings)
    if control:
        load_servers(settings.mcp_servers_file)
