"""Infra-storm benchmark: a PR whose one shard failed every config with one NCCL error.

    .venv/bin/python benchmarks/infra_storm.py [--configs 80000] [--cap 200] [--repeat 3]

A base commit where every config passes and a PR head where every config crashed with "NCCL
error ... unhandled system error" (two attempts each) are uploaded through the real HTTP API
to a service in its own process (uvicorn on 127.0.0.1, SQLite). Then the PR report (JSON) and
the PR page (HTML) are read: the time and size of each, and the service process's peak RSS
growth while answering (VmHWM after minus VmRSS before; the upload's peak is behind us: the
service is restarted after seeding). Targets, printed next to the figures and never enforced:
report and page <= 1 s and <= 1 MB each. The issue's figure before capping: 8 s and 50 MB for
the report, 11 s and 650 MB for the page.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from sqlmodel import Session

from cpci import urls
from cpci.server.core.db import create_db_engine
from cpci.server.core.migrate import upgrade
from cpci.server.crud.tokens import create_token

REPO = "bench/storm"
BASE, HEAD = "a" * 40, "b" * 40
NCCL = "NCCL error in: ProcessGroupNCCL.cpp:{n}, unhandled system error, NCCL version 2.21.5"
#: The child: the service over the database in argv[1], on the listening socket in argv[2].
SERVICE = """
import socket, sys, uvicorn
from cpci.server import Settings, create_app
settings = Settings(database_url=sys.argv[1], report_section_cap=int(sys.argv[3]),
                    max_results_per_upload=1_000_000, max_upload_bytes=512 * 1024 * 1024)
server = uvicorn.Server(uvicorn.Config(create_app(settings), log_level="warning"))
server.run(sockets=[socket.socket(fileno=int(sys.argv[2]))])
"""


def results(configs: int, head: bool) -> list[dict[str, Any]]:
    out = []
    for i in range(configs):
        one = {"nodeid": f"tests/test_cp.py::test_attn[cfg{i}]", "world_size": 2}
        if not head:
            out.append({**one, "outcome": "passed", "duration_s": 1.0})
            continue
        errors = [{"rank": 0, "phase": "call", "message": NCCL.format(n=1000 + i % 97)}]
        for attempt in (1, 2):
            out.append(
                {
                    **one,
                    "outcome": "crashed",
                    "duration_s": 3.0,
                    "attempt": attempt,
                    "rank_errors": errors,
                }
            )
    return out


def envelope(commit: str, run: str, rows: list[dict[str, Any]], **extra: Any) -> bytes:
    body = {
        "schema": "cpci.run/1",
        "repository": REPO,
        "commit": commit,
        "ci_run_id": run,
        "shard_index": 0,
        "shard_total": 1,
        "environment": {"torch": "2.4.0", "gpu": "H100", "backend": "nccl"},
        "results": rows,
        **extra,
    }
    return json.dumps(body).encode()


@contextmanager
def service(database: str, cap: int) -> Iterator[tuple[str, int]]:
    """The service in a child process; yields its base URL and pid. The socket listens before
    the child starts, so the first request waits in the backlog instead of polling."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    child = subprocess.Popen(
        [sys.executable, "-c", SERVICE, database, str(sock.fileno()), str(cap)],
        pass_fds=[sock.fileno()],
    )
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", child.pid
    finally:
        child.terminate()
        child.wait(timeout=30)
        sock.close()


def memory_kib(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0])
    return fields


def timed(http: httpx.Client, path: str, repeat: int) -> tuple[list[float], int]:
    times, size = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        response = http.get(path)
        times.append(time.perf_counter() - start)
        response.raise_for_status()
        size = len(response.content)
    return times, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=80_000)
    parser.add_argument("--cap", type=int, default=200, help="CPCI_REPORT_SECTION_CAP")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        database = f"sqlite:///{tmp}/cpci.db"
        engine = create_db_engine(database)
        upgrade(engine)
        with Session(engine) as session:
            token = create_token(session=session, repository=REPO).token
            session.commit()
        engine.dispose()
        auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        with service(database, args.cap) as (url, _), httpx.Client(base_url=url, timeout=600) as h:
            start = time.perf_counter()
            for body in (
                envelope(BASE, "1", results(args.configs, head=False), branch="main"),
                envelope(
                    HEAD,
                    "2",
                    results(args.configs, head=True),
                    branch="pr",
                    pull_request=1,
                    base_commit=BASE,
                ),
            ):
                response = h.post("/api/v1/uploads", content=body, headers=auth)
                assert response.status_code == 201, response.text
            print(
                f"seeded {args.configs:,} configs (base passes, head: 2 crashed attempts each) "
                f"in {time.perf_counter() - start:.1f} s"
            )
        with (
            service(database, args.cap) as (url, pid),
            httpx.Client(base_url=url, timeout=600) as h,
        ):
            h.get("/healthz").raise_for_status()
            before = memory_kib(pid)["VmRSS"]
            report_s, report_b = timed(h, urls.api_pull_report(REPO, 1), args.repeat)
            page_s, page_b = timed(h, urls.pull(REPO, 1), args.repeat)
            peak = memory_kib(pid)["VmHWM"]
            report = h.get(urls.api_pull_report(REPO, 1)).json()
    storms = [(s["shard"], s["configs"], s["infra_rule"]) for s in report["storms"]]
    print(
        f"storms: {storms}; by verdict: {report['counts']['by_verdict']}; "
        f"infra listed {len(report['infra'])} of {report['section_totals']['infra']:,}"
    )
    for name, times, size in (("report JSON", report_s, report_b), ("PR page", page_s, page_b)):
        print(
            f"{name}: first {times[0] * 1000:.0f} ms, median {statistics.median(times) * 1000:.0f}"
            f" ms over {len(times)}; {size / 1e6:.2f} MB (target <= 1 s, <= 1 MB)"
        )
    print(
        f"service peak RSS growth while answering: {(peak - before) / 1024:.0f} MiB "
        f"(RSS before {before / 1024:.0f} MiB); load: {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
