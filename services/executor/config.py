"""The models file: model servers by name, read once when the execution plane starts.

```toml
[models.qwen]
base_url = "http://127.0.0.1:8000/v1"   # where /chat/completions is
model = "Qwen/Qwen2.5-7B-Instruct"       # the server's own model id
api_key_env = "VLLM_API_KEY"             # or api_key_file = "/run/secrets/vllm"
trust = "local"                          # or "external" (the default)
timeout = 60                             # seconds without a byte from the server
stream_tools = true                      # false: ask rounds with tools without streaming
```

The API key is read from the environment or the secret file when a call is made and is
sent only in the request's `authorization` header: it never enters a request, a reply,
an event, a log line or an error message.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import msgspec

Trust = Literal["local", "external"]
"""`local`: runs where the deployment's data may go (in-process, or a server the operator
runs); `external`: anything else. A local-only agent never reaches an external model."""


class ModelConfigError(ValueError):
    """The models file, or one model in it, cannot be used; the message says why."""


class RemoteModel(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    base_url: str
    model: str
    """The model id the server knows (`model` in the chat-completions request)."""
    api_key_env: str = ""
    api_key_file: str = ""
    trust: Trust = "external"
    timeout: float = 60.0
    """Seconds the server may stay silent (connecting, or between two chunks)."""
    max_tokens: int = 0
    """A ceiling on completion tokens for this server; 0 keeps the spec's."""
    stream_tools: bool = True
    """False for a server that cannot stream tool calls (llama-cpp-python's own): rounds
    that offer tools are then asked without streaming, and their text arrives whole."""


class ModelsFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    models: dict[str, RemoteModel] = {}


def load_models_file(path: Path) -> dict[str, RemoteModel]:
    """The models in `path`, checked; `ModelConfigError` says what is wrong and where."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise ModelConfigError(
            f"The models file {path} cannot be read: {error.strerror or error}."
        ) from error
    try:
        parsed = msgspec.toml.decode(raw, type=ModelsFile)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise ModelConfigError(f"The models file {path} is malformed: {error}.") from error
    for name, model in parsed.models.items():
        _check(path, name, model)
    return dict(parsed.models)


def _check(path: Path, name: str, model: RemoteModel) -> None:
    where = f"In the models file {path}, model {name!r}"
    url = urlsplit(model.base_url)
    if url.scheme not in {"http", "https"} or not url.netloc:
        raise ModelConfigError(
            f"{where} has base_url {model.base_url!r}; it must be an http:// or https:// URL "
            "such as http://127.0.0.1:8000/v1."
        )
    if model.api_key_env and model.api_key_file:
        raise ModelConfigError(f"{where} names both api_key_env and api_key_file; keep one.")
    if model.timeout <= 0:
        raise ModelConfigError(f"{where} has timeout {model.timeout}; it must be above 0.")
    if model.max_tokens < 0:
        raise ModelConfigError(f"{where} has max_tokens {model.max_tokens}; it must be 0 or more.")


def api_key(name: str, model: RemoteModel) -> str | None:
    """The model's API key, or None when it needs none. The message of the error names the
    variable or file, never the key."""
    if model.api_key_env:
        value = os.environ.get(model.api_key_env, "").strip()
        if not value:
            raise ModelConfigError(
                f"The model {name!r} takes its API key from the environment variable "
                f"{model.api_key_env}, which is not set on the execution plane."
            )
        return value
    if model.api_key_file:
        try:
            value = Path(model.api_key_file).read_text().strip()
        except OSError as error:
            raise ModelConfigError(
                f"The model {name!r} takes its API key from {model.api_key_file}, which "
                f"cannot be read: {error.strerror or error}."
            ) from error
        if not value:
            raise ModelConfigError(f"The API key file {model.api_key_file} of {name!r} is empty.")
        return value
    return None
