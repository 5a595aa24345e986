"""An OTLP/HTTP receiver in front of the trace store: it keeps every span an export sent,
links included (Phoenix keeps no links: its OTLP decoder drops them), and passes each
export on to the store unchanged, answering what the store answered."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue


@dataclass(frozen=True)
class Link:
    trace_id: str
    span_id: str
    attributes: dict[str, str]


@dataclass(frozen=True)
class WireSpan:
    name: str
    trace_id: str
    span_id: str
    links: tuple[Link, ...]


def _strings(attributes: Iterator[KeyValue]) -> dict[str, str]:
    return {kv.key: kv.value.string_value for kv in attributes}


def decoded(body: bytes) -> list[WireSpan]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    return [
        WireSpan(
            span.name,
            span.trace_id.hex(),
            span.span_id.hex(),
            tuple(
                Link(link.trace_id.hex(), link.span_id.hex(), _strings(iter(link.attributes)))
                for link in span.links
            ),
        )
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


class Wire:
    def __init__(self, store_url: str) -> None:
        self.store_url = store_url
        self._spans: list[WireSpan] = []
        self._lock = threading.Lock()

    def spans(self) -> list[WireSpan]:
        with self._lock:
            return list(self._spans)

    def received(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        plain = gzip.decompress(body) if headers.get("content-encoding") == "gzip" else body
        with self._lock:
            self._spans += decoded(plain)
        forwarded = {k: v for k, v in headers.items() if k in ("content-type", "content-encoding")}
        return httpx.post(f"{self.store_url}/v1/traces", content=body, headers=forwarded)


def _handler(wire: Wire) -> type[BaseHTTPRequestHandler]:
    class Receive(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            headers = {k.lower(): v for k, v in self.headers.items()}
            answer = wire.received(body, headers)
            self.send_response(answer.status_code)
            self.send_header("content-type", answer.headers.get("content-type", ""))
            self.send_header("content-length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    return Receive


@contextmanager
def wire_to(store_url: str) -> Iterator[tuple[Wire, str]]:
    """The receiver on a free loopback port, and its base URL."""
    wire = Wire(store_url)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(wire))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield wire, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
