"""Sending with nothing lost: retries with backoff, a disk spool while the service is down, a
flush later, oldest first."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cpci.cli import main
from cpci.upload.errors import UploadFailed
from cpci.upload.retry import Backoff
from cpci.upload.send import Delivered, deliver
from cpci.upload.spool import Binding, Spool
from tests.builders import REPO, envelope
from tests.live_server import loopback_socket
from tests.upload.support import (
    LiveService,
    live_service,
    migrated_database,
    receipt_body,
    results_file,
    upload_args,
)


def scripted(statuses: list[int | None], seen: list[str]) -> httpx.MockTransport:
    """Answers in order: a status, or None for "no answer" (connection refused)."""

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content)["ci_run_id"])
        status = statuses.pop(0)
        if status is None:
            raise httpx.ConnectError("connection refused", request=request)
        if status not in (200, 201):
            return httpx.Response(status, json={"detail": "no"})
        return httpx.Response(status, content=receipt_body(seen[-1]))

    return httpx.MockTransport(handle)


def backoff(waits: list[float]) -> Backoff:
    return Backoff(attempts=3, base_s=1.0, sleep=waits.append, jitter=lambda low, high: high)


def token() -> str:
    return "t"


def send(
    spool: Spool,
    run: str,
    statuses: list[int | None],
    seen: list[str] | None = None,
    waits: list[float] | None = None,
) -> Delivered:
    """`deliver` of run `run` to a service answering `statuses` in order (see `scripted`)."""
    transport = scripted(statuses, [] if seen is None else seen)
    retry = backoff([] if waits is None else waits)
    return deliver(
        "http://cpci",
        token,
        envelope(ci_run_id=run),
        spool=spool,
        backoff=retry,
        transport=transport,
    )


def test_5xx_is_retried_with_growing_backoff(tmp_path: Path) -> None:
    seen: list[str] = []
    waits: list[float] = []
    done = send(Spool(tmp_path), "1", [503, 502, 201], seen=seen, waits=waits)
    assert done.receipt is not None
    assert waits == [1.0, 2.0]
    assert seen == ["1", "1", "1"]


def test_a_refusal_a_retry_cannot_fix_is_raised_and_not_spooled(tmp_path: Path) -> None:
    waits: list[float] = []
    with pytest.raises(UploadFailed, match="answered 422"):
        send(Spool(tmp_path), "1", [422], waits=waits)
    assert waits == []
    assert Spool(tmp_path).pending() == []


def test_spooled_while_down_then_flushed_first_by_the_next_upload(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    seen: list[str] = []
    down = send(spool, "1", [None, None, 503], seen=seen)
    assert down.receipt is None
    assert down.spooled is not None
    assert [s.envelope.ci_run_id for s in spool.pending()] == ["1"]
    # The same upload spooled again keeps one file: resending cannot duplicate anything.
    spool.put(Binding("http://cpci", REPO), envelope(ci_run_id="1"))
    assert len(spool.pending()) == 1
    seen.clear()
    up = send(spool, "2", [201, 201], seen=seen)
    assert seen == ["1", "2"]  # the spooled one first
    assert up.receipt is not None
    assert len(up.flushed) == 1
    assert spool.pending() == []


def test_a_spooled_upload_refused_for_good_is_set_aside_not_deleted(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.put(Binding("http://cpci", REPO), envelope(ci_run_id="1"))
    up = send(spool, "2", [409, 201])
    assert up.receipt is not None
    assert len(up.rejected) == 1
    assert len(list((tmp_path / "rejected").glob("upload-*.json"))) == 1
    reasons = list((tmp_path / "rejected").glob("*.reason.txt"))
    assert "answered 409" in reasons[0].read_text()


@pytest.fixture
def reserved_port() -> Iterator[socket.socket]:
    """A bound, not yet listening socket: connections to it are refused until it listens."""
    sock = loopback_socket()
    yield sock
    sock.close()


def test_service_down_then_up_nothing_lost_nothing_twice(
    reserved_port: socket.socket, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    database = migrated_database(tmp_path)
    results = results_file(tmp_path / "r.jsonl", envelope(ci_run_id="1").results)
    url = f"http://127.0.0.1:{reserved_port.getsockname()[1]}"
    down = LiveService(url, database.token, database.url)
    args = upload_args(down, tmp_path, results, "--commit", "b" * 40, "--ci-run-id", "77")
    args += ["--retries", "1"]
    assert main(args) == 3  # down: spooled
    assert "SPOOLED to" in capsys.readouterr().err
    with live_service(database, reserved_port):
        spool = str(tmp_path / "spool")
        flush = ["upload", "--flush", "--token", database.token, "--spool", spool, "--server", url]
        flush += ["--repository", REPO]
        assert main(flush) == 0
        assert "flushed 1 spooled upload(s); 0 still in" in capsys.readouterr().out
        assert main(args) == 0  # the same shard again: stored once
        assert "duplicate" in capsys.readouterr().out
        summary = httpx.get(f"{url}/api/v1/repos/{REPO}/runs/77").json()
        assert summary["outcomes"] == {"passed": 1}  # one result: nothing lost, nothing twice
    database.engine.dispose()
