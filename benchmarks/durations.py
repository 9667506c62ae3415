"""The durations endpoint on a repository with thousands of configs: how long every shard job
waits for its balancing data before planning.

    .venv/bin/python benchmarks/durations.py [--configs 5000] [--runs 20] [--postgres]

Seeds `--runs` branch runs of `--configs` passing configs each through real uploads, then times
`GET .../durations` (the default 10 runs, and all of them) over real HTTP to uvicorn on
127.0.0.1. Prints the figures; there is no pass mark.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn
from sqlalchemy.engine import make_url
from sqlmodel import Session

from cpci import urls
from cpci.schema import ConfigDurations, ResultRecord, RunEnvelope
from cpci.server import Settings, create_app
from cpci.server.core.db import create_db_engine
from cpci.server.core.migrate import upgrade
from cpci.server.crud.tokens import create_token
from cpci.server.devpg import find_binaries, throwaway_postgres

REPO = "bench/durations"


@contextmanager
def serve(url: str) -> Iterator[tuple[str, str]]:
    """uvicorn over `url` on a loopback socket that listens before the server starts."""
    engine = create_db_engine(url)
    upgrade(engine)
    with Session(engine) as session:
        token = create_token(session=session, repository=REPO).token
        session.commit()
    app = create_app(Settings(database_url=url), engine=engine)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", token
    finally:
        server.should_exit = True
        thread.join()
        sock.close()
        engine.dispose()


def seed(http: httpx.Client, configs: int, runs: int) -> None:
    for run in range(runs):
        results = [
            ResultRecord(
                nodeid=f"tests/test_cp.py::test_attn[cfg{i}]",
                world_size=2,
                outcome="passed",
                duration_s=1.0 + (i * 7 + run) % 13,
            )
            for i in range(configs)
        ]
        envelope = RunEnvelope(
            repository=REPO,
            commit=f"{run + 1:040x}",
            branch="main",
            ci_run_id=f"r{run}",
            results=results,
        )
        response = http.post(urls.API_UPLOADS, content=envelope.model_dump_json(by_alias=True))
        assert response.status_code == 201, response.text


def timed(http: httpx.Client, path: str, repeat: int) -> tuple[list[float], ConfigDurations]:
    out, answer = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        response = http.get(path)
        out.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, response.text
        answer = response
    assert answer is not None
    return out, ConfigDurations.model_validate_json(answer.content)


def bench(url: str, label: str, configs: int, runs: int) -> None:
    with serve(url) as (base, token):
        headers = {"Authorization": f"Bearer {token}", "content-type": "application/json"}
        with httpx.Client(base_url=base, headers=headers, timeout=300) as http:
            start = time.perf_counter()
            seed(http, configs, runs)
            seeded = time.perf_counter() - start
            print(f"{label}: seeded {runs} runs x {configs:,} configs in {seeded:.1f} s")
            for read in sorted({min(10, runs), runs}):
                times, answer = timed(http, urls.api_durations(REPO, runs=read), 10)
                print(
                    f"{label}: durations of {len(answer.durations):,} configs over "
                    f"{answer.runs} runs ({configs * answer.runs:,} results read): "
                    f"p50 {statistics.median(times):.0f} ms, max {max(times):.0f} ms"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", type=int, default=5_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--postgres", action="store_true", help="also on a throwaway PostgreSQL")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench(f"sqlite:///{tmp}/bench.db", "SQLite", args.configs, args.runs)
    if not args.postgres:
        return
    bindir = find_binaries()
    if bindir is None:
        raise SystemExit("no PostgreSQL binaries found")
    with throwaway_postgres(bindir) as admin:
        url = make_url(admin).render_as_string(hide_password=False)
        bench(url, "PostgreSQL", args.configs, args.runs)


if __name__ == "__main__":
    main()
