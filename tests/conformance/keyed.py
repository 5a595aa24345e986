"""A local HTTP proxy that adds an API key to every request it forwards to one URL.

The conformance suite's server mode connects to a URL with no way to send a header of its
own, and the gateway answers 401 to a request without a key: the suite is pointed at this
proxy, which forwards each request to the gateway's `/mcp` with the key added and streams
the answer back as it comes (an SSE stream included).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

DROPPED = {"host", "connection", "keep-alive", "transfer-encoding", "content-length"}


@contextlib.contextmanager
def keyed_proxy(upstream: str, key: str) -> Iterator[str]:
    """Serve the proxy on a free local port for the block; yields its URL."""
    client = httpx.Client(timeout=httpx.Timeout(30.0, read=None))

    class Forward(BaseHTTPRequestHandler):
        # one answer per connection, ended by closing it: the body needs no length
        protocol_version = "HTTP/1.0"

        def do_GET(self) -> None:
            self._forward()

        def do_POST(self) -> None:
            self._forward()

        def do_DELETE(self) -> None:
            self._forward()

        def _forward(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k: v for k, v in self.headers.items() if k.lower() not in DROPPED}
            headers["Authorization"] = f"Bearer {key}"
            request = client.build_request(self.command, upstream, headers=headers, content=body)
            answer = client.send(request, stream=True)
            try:
                self.send_response(answer.status_code)
                for name, value in answer.headers.multi_items():
                    if name.lower() not in DROPPED:
                        self.send_header(name, value)
                self.end_headers()
                for chunk in answer.iter_raw():
                    self.wfile.write(chunk)
                    self.wfile.flush()
            except httpx.HTTPError:
                # the gateway ended a stream (an SSE stream closed when its request ended):
                # the suite reads the same end from this connection's close
                pass
            finally:
                answer.close()

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        client.close()
