"""Every route that takes a body bounds it while reading, before parsing and authentication.

Against a real `cpci serve`: a 200 MB body, declared (Content-Length) or streamed (chunked),
sent without credentials to every route that takes one (listed from the service's OpenAPI and
its route table, so a new route is tested without a line here), is refused with a 413 naming the
limit and its setting, or a 401 from a route that authenticates before it reads, while the
service's peak memory (VmHWM in /proc, reset before each request) grows by a few limits, not by
the body. In process: just over each route's limit streamed is a 413 naming the setting; deeply
nested JSON is a 422 before `json.loads` would see it.
"""

from __future__ import annotations

import re
import select
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import Engine

from cpci.server import Settings, create_app
from tests.reliability.service import Served, prepare_database

MB = 1024 * 1024
BODY = 200 * MB
UPLOAD_LIMIT = 4 * MB
OTHER_LIMIT = 1 * MB
SETTINGS = {
    "CPCI_MAX_UPLOAD_BYTES": str(UPLOAD_LIMIT),
    "CPCI_MAX_BODY_BYTES": str(OTHER_LIMIT),
    "CPCI_GITHUB_WEBHOOK_SECRET": "webhook-secret",  # so the webhook reads its body
    "CPCI_WARM_ON_START_S": "0",
}
#: Fails a request that makes no progress for this long (a hang), rather than waiting forever.
HANG_S = 120
#: Methods that never take a body here.
SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
#: At most two copies of the largest limit (read, joined) and the interpreter's own noise.
GROWTH_BOUND = 2 * UPLOAD_LIMIT + 16 * MB


def routes_of(app: FastAPI) -> set[tuple[str, str]]:
    """(method, path) of every route of the app's route table that takes a body, schema or
    not (the UI's routes are hidden from the OpenAPI)."""
    found: set[tuple[str, str]] = set()

    def walk(routes: Any) -> None:
        for route in routes:
            included = getattr(route, "effective_candidates", None)  # an included router
            if included is not None:
                walk(included())
                continue
            for method in getattr(route, "methods", None) or ():
                if method not in SAFE:
                    found.add((method, route.path))

    walk(app.routes)
    return found


def body_routes(base_url: str) -> list[tuple[str, str]]:
    """Every route taking a body, from the live service's OpenAPI and the app's route table,
    with its path parameters filled in."""
    schema = httpx.get(f"{base_url}/openapi.json").json()
    listed = {
        (method.upper(), path)
        for path, operations in schema["paths"].items()
        for method in operations
        if method.upper() not in SAFE
    }
    app = create_app(Settings(database_url="sqlite://", github_webhook_secret=SecretStr("s")))
    every = listed | routes_of(app)
    assert {path for _, path in every} >= {
        "/api/v1/uploads",
        "/api/v1/repos/{owner}/{repo}/commits",
        "/github/webhook",
    }, "the route table walk found no routes: has FastAPI changed how it keeps them?"
    return sorted((method, re.sub(r"\{[^}]+\}", "x", path)) for method, path in every)


def peak_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1))  # type: ignore[union-attr]


def reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS


def send_body(base_url: str, method: str, path: str, *, chunked: bool) -> tuple[int, bytes]:
    """Send BODY bytes of JSON to `path` over a raw socket, reading the answer as soon as it
    comes (the service may answer before reading the body; it never reads it all)."""
    where = urlsplit(base_url)
    link = b'{"commit": "' + b"a" * 40 + b'", "parent": "' + b"b" * 40 + b'"}, '
    piece = link * (MB // len(link))
    count = BODY // len(piece)
    opening = b'{"parents": ['
    framing = (
        "Transfer-Encoding: chunked"
        if chunked
        else f"Content-Length: {len(opening) + count * len(piece)}"
    )
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: {where.netloc}\r\nContent-Type: application/json\r\n"
        f"X-GitHub-Event: ping\r\nX-GitHub-Delivery: big-1\r\n{framing}\r\n\r\n"
    ).encode()

    def frames() -> Iterator[bytes]:
        for data in (opening, *[piece] * count):
            if chunked:
                yield b"%x\r\n" % len(data)
            yield data
            if chunked:
                yield b"\r\n"
        if chunked:
            yield b"0\r\n\r\n"

    assert where.port is not None, f"{base_url} names its port"
    with socket.create_connection((where.hostname, where.port)) as sock:
        sock.sendall(head)
        sock.setblocking(False)
        pending, left = memoryview(b""), frames()
        while True:
            readable, writable, _ = select.select([sock], [sock], [], HANG_S)
            assert readable or writable, f"{path}: no answer and no progress in {HANG_S} s"
            if readable:
                break
            if not pending:
                following = next(left, None)
                if following is None:
                    break  # all sent: the answer follows
                pending = memoryview(following)
            try:
                pending = pending[sock.send(pending) :]
            except BlockingIOError:
                continue
        sock.setblocking(True)
        return read_response(sock)


def read_response(sock: socket.socket) -> tuple[int, bytes]:
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed without an answer: {received!r}"
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        body += sock.recv(65536)
    return int(head.split()[1]), body[:length]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("big-bodies")
    url = f"sqlite:///{directory / 'cpci.db'}"
    prepare_database(url)
    served = Served(url, directory / "serve.log", env=SETTINGS)
    served.start()
    yield served
    served.stop()


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_200_mb_body_to_every_body_taking_route_keeps_memory_bounded(
    service: Served, chunked: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    assert service.process is not None
    pid = service.process.pid
    routes = body_routes(service.url)
    for method, path in routes:  # warm each route once: first-request imports are not growth
        send_small = httpx.request(method, service.url + path, content=b"{}")
        assert send_small.status_code < 500, send_small.text
    figures = []
    for method, path in routes:
        reset_peak(pid)
        before = peak_kib(pid)
        status, body = send_body(service.url, method, path, chunked=chunked)
        growth = (peak_kib(pid) - before) * 1024
        figures.append(f"{method} {path}: {status}, peak memory +{growth / MB:.1f} MB")
        # A route that authenticates before reading says 401 without reading; the rest, 413.
        assert status in (401, 413) if chunked else status == 413, (path, status, body)
        if status == 413:
            assert b"CPCI_MAX_UPLOAD_BYTES" in body or b"CPCI_MAX_BODY_BYTES" in body, body
        assert growth < GROWTH_BOUND, figures
    with capsys.disabled():
        print(f"\n{BODY // MB} MB bodies, {'chunked' if chunked else 'declared'}:", *figures)
    assert service.process.poll() is None, "the service is still up"


# --- in process: the limit of each route, the nesting check ------------------------------


@pytest.fixture
def client(db_url: str, engine: Engine) -> Iterator[TestClient]:
    settings = Settings(
        database_url=db_url,
        max_upload_bytes=UPLOAD_LIMIT,
        max_body_bytes=OTHER_LIMIT,
        github_webhook_secret=SecretStr("webhook-secret"),
    )
    with TestClient(create_app(settings, engine=engine)) as made:
        yield made


@pytest.mark.parametrize(
    ("path", "limit", "setting"),
    [
        ("/api/v1/uploads", UPLOAD_LIMIT, "CPCI_MAX_UPLOAD_BYTES"),
        ("/api/v1/repos/acme/attn/commits", OTHER_LIMIT, "CPCI_MAX_BODY_BYTES"),
        ("/github/webhook", UPLOAD_LIMIT, "CPCI_MAX_UPLOAD_BYTES"),
    ],
)
def test_one_byte_over_a_routes_limit_is_413_naming_the_limit_and_its_setting(
    client: TestClient, token: str, path: str, limit: int, setting: str
) -> None:
    """With a valid token, so that the upload route reads its body."""
    body = b" " * (limit + 1)

    def streamed() -> Iterator[bytes]:  # no Content-Length: counted while read
        yield from (body[i : i + 65536] for i in range(0, len(body), 65536))

    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    for content in (body, streamed()):
        refused = client.post(path, content=content, headers=headers)
        assert refused.status_code == 413, refused.text
        assert refused.json()["code"] == "payload_too_large"
        assert f"larger than {limit} bytes" in refused.json()["detail"].replace(
            "the server's limit of ", ""
        )
        assert setting in refused.json()["detail"]
    exactly = client.post(path, content=body[:limit], headers=headers)
    assert exactly.status_code != 413, "the limit itself is allowed"


@pytest.mark.parametrize("depth", [201, 100_000])
def test_deep_json_to_a_fastapi_parsed_body_is_422_before_any_credential_is_asked(
    client: TestClient, depth: int
) -> None:
    deep = b'{"parents": ' + b"[" * depth + b"]" * depth + b"}"
    refused = client.post(
        "/api/v1/repos/acme/attn/commits",
        content=deep,
        headers={"Content-Type": "application/json"},
    )
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"][0]["type"] == "json_too_deep"
    shallow = b'{"parents": ' + b"[" * 150 + b"]" * 150 + b"}"
    assert client.post("/api/v1/repos/acme/attn/commits", content=shallow).status_code == 401
