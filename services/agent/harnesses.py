"""The harnesses specs may name: the built-ins and the `HARNESSES` mapping of each module
of `TEASPILL_HARNESS_MODULES`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from services.config import plugin
from services.harness.registry import BUILTIN_HARNESSES, Harness
from services.settings import ConfigError

SETTING = "TEASPILL_HARNESS_MODULES"


def load_harnesses(modules: Iterable[str]) -> Mapping[str, Harness]:
    found = dict(BUILTIN_HARNESSES)
    for module in modules:
        offered = plugin(module, "HARNESSES", SETTING)
        if not isinstance(offered, Mapping):
            raise ConfigError(
                f"{SETTING} names {module}, whose HARNESSES is not a mapping of names to harnesses."
            )
        for name, harness in offered.items():
            if name in found:
                raise ConfigError(
                    f"{SETTING} names {module}, whose harness {name!r} is already a harness "
                    "of this deployment: give it another name."
                )
            found[name] = harness
    return found
