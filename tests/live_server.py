"""Real HTTP on loopback, in a thread, for end-to-end tests: an ASGI app served by uvicorn, or a
plain `http.server` handler for stand-ins (a JWKS, a fake GitHub, a proxy, an attacker's URL)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import uvicorn


def loopback_socket() -> socket.socket:
    """A socket bound to a free loopback port; refuses connections until it listens."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


@contextmanager
def serve(app: Any, sock: socket.socket | None = None) -> Iterator[str]:
    """Serve `app` on `sock` (a fresh loopback one by default) and yield its base URL.

    The socket listens before the server thread starts, so a client that connects first waits in
    the backlog: no polling for readiness.
    """
    owned = sock is None
    sock = sock or loopback_socket()
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        if owned:
            sock.close()


@contextmanager
def serve_handler(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve `handler` on a fresh loopback port in a thread; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@dataclass(frozen=True)
class Request:
    """A request as a stand-in sees it (header names lower-cased)."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes


@contextmanager
def serve_answers(
    answer: Callable[[Request], tuple[int, bytes]], content_type: str = "application/json"
) -> Iterator[str]:
    """Serve GET and POST on a fresh loopback port with `answer(request) -> (status, body)`;
    yields the base URL."""

    class Handler(BaseHTTPRequestHandler):
        def _any(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            headers = {name.lower(): value for name, value in self.headers.items()}
            status, out = answer(Request(self.command, self.path, headers, body))
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        do_GET = do_POST = _any

        def log_message(self, *args: Any) -> None:
            pass

    with serve_handler(Handler) as url:
        yield url
