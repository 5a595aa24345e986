"""Real model servers for the tests: llama-cpp-python's OpenAI-compatible server on the
bundled SmolLM2, and a bare HTTP server that counts the requests it is sent."""

from __future__ import annotations

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from services.executor.llama import bundled_model_path
from services.stack.process import ManagedProcess, free_port

MODEL_ID = "smollm2-served"


class LlamaServer:
    """`python -m llama_cpp.server` on a free port, with an API key, logging to a file.

    `chatml-function-calling` is the chat format that gives SmolLM2 (whose own template
    ignores tools) native OpenAI tool calls.
    """

    def __init__(
        self,
        log_dir: Path,
        api_key: str,
        name: str = "llama-server",
        *,
        threads: int = 1,
        context: int = 2048,
    ) -> None:
        self.port = free_port()
        self.api_key = api_key
        self.log_path = log_dir / f"{name}.log"
        argv = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(bundled_model_path()), "--model_alias", MODEL_ID,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--n_ctx", str(context), "--n_threads", str(threads),
            "--n_threads_batch", str(threads),
            "--chat_format", "chatml-function-calling", "--api_key", api_key,
        ]  # fmt: skip
        self.process = ManagedProcess(name, argv, dict(os.environ), self.log_path)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        self.process.spawn()
        self.process.wait_until(self._ready, 60, "serve /v1/models")

    def _ready(self) -> bool:
        auth = {"authorization": f"Bearer {self.api_key}"}
        try:
            return httpx.get(f"{self.base_url}/models", headers=auth, timeout=2).is_success
        except httpx.TransportError:
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


class EmbeddingsServer:
    """`python -m llama_cpp.server` serving SmolLM2's vectors on `/v1/embeddings`.

    SmolLM2 is a causal model whose file names no pooling, so the server would answer one
    vector per token of each text; the metadata override `llama.pooling_type=int:1` (mean)
    makes it answer one vector per text, as an embeddings model does.
    """

    def __init__(self, log_dir: Path, name: str = "embeddings-server") -> None:
        self.port = free_port()
        self.log_path = log_dir / f"{name}.log"
        argv = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(bundled_model_path()), "--model_alias", MODEL_ID,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--n_ctx", "512", "--n_threads", "1", "--n_threads_batch", "1",
            "--embedding", "true", "--kv_overrides", "llama.pooling_type=int:1",
        ]  # fmt: skip
        self.process = ManagedProcess(name, argv, dict(os.environ), self.log_path)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        self.process.spawn()
        self.process.wait_until(self._ready, 60, "serve /v1/models")

    def _ready(self) -> bool:
        try:
            return httpx.get(f"{self.base_url}/models", timeout=2).is_success
        except httpx.TransportError:
            return False


class CountingServer:
    """Answers every request 500 and counts them: the stand-in for an external API. Like
    some real ones, its error repeats the authorization it was sent."""

    def __init__(self) -> None:
        self.requests = 0
        counter = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                counter.requests += 1
                self.send_response(500)
                self.send_header("content-type", "application/json")
                self.end_headers()
                sent = self.headers.get("authorization") or "no key"
                said = {"error": {"message": f"counted; you sent {sent}"}}
                self.wfile.write(json.dumps(said).encode())

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> CountingServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
