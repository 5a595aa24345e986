"""The operator's MCP servers file (`TEASPILL_MCP_SERVERS_FILE`, TOML).

Each `[servers.NAME]` table is either a stdio server (`command`, `args`, `env`) or a
streamable-HTTP one (`url`, `headers`), with `tenants` naming who may use it (left out:
every tenant). A value in `env` or `headers` is a plain string or a secret taken when a
connection is made: `{from_env = "VAR"}` or `{from_file = "/path"}`. The file keeps only
where a secret is; its value is read at connect time, held by the connection alone and
never put in a step result, an event, a log line or an error.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.settings import ConfigError

SERVER_NAME = r"^[a-z0-9][a-z0-9_-]{0,31}$"


@dataclass(frozen=True)
class Secret:
    """Where a value is: an environment variable or a file (read when connecting)."""

    env: str = ""
    file: str = ""

    def value(self) -> str:
        if self.env:
            found = os.environ.get(self.env)
            if found is None:
                raise SecretMissingError(f"the environment variable {self.env} is not set")
            return found
        try:
            return Path(self.file).read_text().strip()
        except OSError as error:
            raise SecretMissingError(
                f"the file {self.file} cannot be read ({error.strerror})"
            ) from None


class SecretMissingError(Exception):
    """A secret's source is missing; the message names the source, never a value."""


Value = str | Secret


@dataclass(frozen=True)
class Server:
    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, Value] = field(default_factory=dict)
    url: str = ""
    headers: Mapping[str, Value] = field(default_factory=dict)
    tenants: frozenset[str] | None = None
    """Who may use the server; None for every tenant."""

    def allows(self, tenant: str) -> bool:
        return self.tenants is None or tenant in self.tenants


def resolved(values: Mapping[str, Value]) -> dict[str, str]:
    """The values with their secrets read (raises `SecretMissingError`)."""
    return {k: v if isinstance(v, str) else v.value() for k, v in values.items()}


def load_servers(path: Path | None) -> dict[str, Server]:
    """The servers the file names (none without a file); a `ConfigError` sentence when
    the file cannot be used."""
    if path is None:
        return {}
    where = f"TEASPILL_MCP_SERVERS_FILE={path}"
    try:
        raw = tomllib.loads(path.read_text())
    except OSError as error:
        raise ConfigError(f"{where} cannot be read: {error.strerror}.") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{where} is not valid TOML: {error}.") from None
    unknown = sorted(set(raw) - {"servers"})
    if unknown:
        raise ConfigError(
            f"{where} has unknown tables {', '.join(unknown)}; it has [servers.NAME]."
        )
    servers = raw.get("servers", {})
    if not isinstance(servers, dict):
        raise ConfigError(f"{where}: 'servers' must be a table of [servers.NAME] tables.")
    return {name: _server(where, name, table) for name, table in servers.items()}


_FIELDS = {"command", "args", "env", "url", "headers", "tenants"}


def _server(where: str, name: str, table: Any) -> Server:
    at = f"{where}: server {name!r}"
    if not re.fullmatch(SERVER_NAME, name):
        raise ConfigError(
            f"{at}: a server's name is 1 to 32 of a-z 0-9 - _, starting with a letter or digit."
        )
    if not isinstance(table, dict):
        raise ConfigError(f"{at} must be a table.")
    unknown = sorted(set(table) - _FIELDS)
    if unknown:
        raise ConfigError(
            f"{at} has unknown fields {', '.join(unknown)}; known: {', '.join(sorted(_FIELDS))}."
        )
    command, url = table.get("command", ""), table.get("url", "")
    if not isinstance(command, str) or not isinstance(url, str) or bool(command) == bool(url):
        raise ConfigError(
            f"{at} needs exactly one of 'command' (stdio) or 'url' (streamable HTTP), as a string."
        )
    if url and not url.startswith(("http://", "https://")):
        raise ConfigError(f"{at}: 'url' must start with http:// or https://.")
    if (command and "headers" in table) or (url and ("env" in table or "args" in table)):
        raise ConfigError(f"{at}: a stdio server takes args and env, an HTTP one headers.")
    return Server(
        name=name,
        command=command,
        args=_strings(at, "args", table.get("args", [])),
        env=_values(at, "env", table.get("env", {})),
        url=url,
        headers=_values(at, "headers", table.get("headers", {})),
        tenants=_tenants(at, table.get("tenants")),
    )


def _strings(at: str, key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{at}: '{key}' must be a list of strings.")
    return tuple(value)


def _tenants(at: str, value: Any) -> frozenset[str] | None:
    return None if value is None else frozenset(_strings(at, "tenants", value))


def _values(at: str, key: str, value: Any) -> dict[str, Value]:
    if not isinstance(value, dict):
        raise ConfigError(f"{at}: '{key}' must be a table of names to values.")
    return {name: _value(f"{at}: '{key}.{name}'", v) for name, v in value.items()}


def _value(at: str, value: Any) -> Value:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((source, where),) = value.items()
        if source == "from_env" and isinstance(where, str) and where:
            return Secret(env=where)
        if source == "from_file" and isinstance(where, str) and where:
            return Secret(file=where)
    raise ConfigError(
        f'{at} must be a string, {{from_env = "VARIABLE"}} or {{from_file = "/path"}}.'
    )
