"""Result service benchmark at scale, through the real ingest path (HTTP uploads to uvicorn on
127.0.0.1): bytes per stored result, ingest results/s with concurrent uploads, one config's
history, a 10,000-config PR report, the flaky list and the dashboard, on SQLite and (with
--postgres) PostgreSQL.

    .venv/bin/python benchmarks/service.py [--postgres] [--results 1000000] [--compare e68a5d6]

`--compare REV` runs the same benchmark a second time on the service as it was at git revision
REV (a worktree of it, imported in a child process) and prints both side by side, so a schema
change shows its figures against the code before it, same sizes, same machine, one run.

Targets (printed next to the figures, never enforced): <= 64 bytes a result (table and indexes
counted), ingest >= 50,000 results/s on PostgreSQL with 16 uploads at once, history p95 <= 25
ms, PR report p50 <= 200 ms, flaky list and dashboard p95 <= 150 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import httpx
import psycopg
import uvicorn
from sqlalchemy.engine import make_url
from sqlmodel import Session

from cpci.server import Settings, create_app
from cpci.server.core.db import create_db_engine
from cpci.server.core.migrate import upgrade
from cpci.server.crud.tokens import create_token
from cpci.server.devpg import find_binaries, free_port, throwaway_postgres

SHARDS, PER_SHARD = 16, 5_000
HISTORY_CONFIGS = 1_000
PR_CONFIGS, BASE_RUNS = 10_000, 5
REPOS = ("bench/ingest", "bench/history", "bench/pr")
#: The figures a run prints and `--json` hands to `--compare`, with their targets.
TARGETS = {
    "bytes_per_result": ("bytes/result", "<= 64"),
    "ingest_rps": ("ingest results/s", ">= 50,000 (PostgreSQL)"),
    "history_p95_ms": ("history p95 ms", "<= 25"),
    "history_deep_p95_ms": ("history deeper page p95 ms", "<= 25"),
    "pr_report_p50_ms": ("PR report p50 ms", "<= 200"),
    "flaky_p95_ms": ("flaky list p95 ms", "<= 150"),
    "dashboard_p95_ms": ("dashboard p95 ms", "<= 150"),
}


def record(i: int, outcome: str = "passed", duration: float | None = None) -> dict[str, Any]:
    """A result as the runner writes it: a measured duration and two metrics."""
    rng = random.Random(i)
    return {
        "nodeid": f"tests/test_cp.py::test_attn[cfg{i}]",
        "world_size": 2,
        "outcome": outcome,
        "duration_s": duration if duration is not None else round(rng.uniform(0.2, 9.0), 6),
        "metrics": {"max_abs_err": rng.uniform(0, 1e-3), "tflops": rng.uniform(100, 400)},
    }


def envelope(
    repo: str, run: str, commit: str, shard: int, total: int, results: list[Any], **extra: Any
) -> bytes:
    body = {
        "schema": "cpci.run/1",
        "repository": repo,
        "commit": commit,
        "branch": "main",
        "ci_run_id": run,
        "shard_index": shard,
        "shard_total": total,
        "environment": {"torch": "2.4.0", "gpu": "H100"},
        "results": results,
        **extra,
    }
    return json.dumps(body).encode()


@contextmanager
def serve(url: str) -> Iterator[tuple[str, dict[str, str]]]:
    """uvicorn on a free loopback port over `url`; yields the base URL and a token per repo."""
    engine = create_db_engine(url)
    upgrade(engine)
    with Session(engine) as session:
        tokens = {repo: create_token(session=session, repository=repo).token for repo in REPOS}
        session.commit()
    app = create_app(Settings(database_url=url), engine=engine)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.05)
    try:
        yield base, tokens
    finally:
        server.should_exit = True
        thread.join()
        engine.dispose()


def upload_all(base: str, token: str, bodies: list[bytes], uploads: int) -> float:
    """Seconds to upload `bodies`, `uploads` of them at once, each answered 201."""
    headers = {"Authorization": f"Bearer {token}", "content-type": "application/json"}
    local = threading.local()

    def send(body: bytes) -> None:
        if not hasattr(local, "http"):
            local.http = httpx.Client(base_url=base, headers=headers, timeout=600)
        response = local.http.post("/api/v1/uploads", content=body)
        assert response.status_code == 201, response.text

    start = time.perf_counter()
    with ThreadPoolExecutor(uploads) as pool:
        list(pool.map(send, bodies))
    return time.perf_counter() - start


def bench_ingest(base: str, token: str, rounds: int, uploads: int) -> float:
    """Results/s over `rounds` CI runs of 16 shards x 5,000 results, `uploads` shards at once.
    The first round creates the 80,000 configs and is not timed, as in a steady state."""
    results = [record(i) for i in range(SHARDS * PER_SHARD)]
    rates = []
    for n in range(rounds + 1):
        bodies = [
            envelope(
                "bench/ingest",
                f"r{n}",
                f"{n + 1:040x}",
                s,
                SHARDS,
                results[s * PER_SHARD : (s + 1) * PER_SHARD],
            )
            for s in range(SHARDS)
        ]
        seconds = upload_all(base, token, bodies, uploads)
        if n:
            rates.append(SHARDS * PER_SHARD / seconds)
    rate = statistics.median(rates)
    print(
        f"ingest: {rate:,.0f} results/s, median of {rounds} runs of {SHARDS} shards x "
        f"{PER_SHARD:,} results, {uploads} uploads at once (target >= 50,000/s on PostgreSQL)"
    )
    return rate


def seed_history(base: str, token: str, total: int, uploads: int) -> None:
    """`total` results of 1,000 configs in 1,000-config runs (one in seven failing), uploaded."""
    runs = total // HISTORY_CONFIGS

    def body(r: int) -> bytes:
        outcome = "failed" if r % 7 == 0 else "passed"
        results = [record(c, outcome) for c in range(HISTORY_CONFIGS)]
        return envelope("bench/history", f"h{r}", f"{r + 1:040x}", 0, 1, results)

    start = time.perf_counter()
    done = 0
    for first in range(0, runs, 64):
        bodies = [body(r) for r in range(first, min(runs, first + 64))]
        upload_all(base, token, bodies, uploads)
        done += len(bodies) * HISTORY_CONFIGS
    print(f"history: uploaded {done:,} results in {time.perf_counter() - start:.0f} s")


def timed(http: httpx.Client, path: str, repeat: int, **params: Any) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = http.get(path, params=params)
        out.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, response.text
    return out


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1]


def bench_history(base: str) -> dict[str, float]:
    key = f"tests/test_cp.py::test_attn[cfg{HISTORY_CONFIGS // 2}]@2"
    with httpx.Client(base_url=base, timeout=60) as http:
        path = "/api/v1/repos/bench/history/history"
        timed(http, path, 5, config=key)  # warm up
        first = timed(http, path, 200, config=key, limit=50)
        page = http.get(path, params={"config": key, "limit": 400}).json()
        cursor = page["next_cursor"] or page["entries"][-1]["result_id"]
        deep = timed(http, path, 100, config=key, limit=50, before=cursor)
        flaky = timed(http, "/api/v1/repos/bench/history/flaky", 20)
        timed(http, "/api/v1/repos/bench/history/dashboard", 2)  # the shard digests, once
        dashboard = timed(http, "/api/v1/repos/bench/history/dashboard", 20)
    figures = {
        "history_p95_ms": pct(first, 95),
        "history_deep_p95_ms": pct(deep, 95),
        "flaky_p95_ms": pct(flaky, 95),
        "dashboard_p95_ms": pct(dashboard, 95),
    }
    print(
        f"history: first page (50) p50 {pct(first, 50):.1f} ms, p95 {pct(first, 95):.1f} ms; "
        f"a deeper page p50 {pct(deep, 50):.1f} ms, p95 {pct(deep, 95):.1f} ms "
        "(target p95 <= 25 ms)"
    )
    print(
        f"flaky list p50 {pct(flaky, 50):.0f} ms, p95 {pct(flaky, 95):.0f} ms; dashboard "
        f"(warm) p50 {pct(dashboard, 50):.0f} ms, p95 {pct(dashboard, 95):.0f} ms "
        "(target p95 <= 150 ms)"
    )
    return figures


def bench_pr_report(base: str, token: str) -> float:
    headers = {"Authorization": f"Bearer {token}", "content-type": "application/json"}
    half = PR_CONFIGS // 2
    with httpx.Client(base_url=base, headers=headers, timeout=120) as http:
        for n in range(BASE_RUNS + 1):
            is_head = n == BASE_RUNS
            commit = "f" * 40 if is_head else f"{n + 1:040x}"
            extra = (
                {"pull_request": 42, "base_commit": f"{BASE_RUNS:040x}", "branch": "feature"}
                if is_head
                else {}
            )
            for shard in range(2):
                results = []
                for i in range(shard * half, (shard + 1) * half):
                    failed = is_head and i % 200 == 0
                    slow = is_head and i % 500 == 1
                    results.append(
                        record(i, "failed" if failed else "passed", 3.0 if slow else 1.0)
                    )
                body = envelope("bench/pr", f"p{n}", commit, shard, 2, results, **extra)
                response = http.post("/api/v1/uploads", content=body)
                assert response.status_code == 201, response.text
        path = "/api/v1/repos/bench/pr/pulls/42/report"
        start = time.perf_counter()
        report = http.get(path).json()
        first = (time.perf_counter() - start) * 1000
        times = timed(http, path, 20)
    # The first request reads the baseline; later ones find it cached, as every PR on the
    # same base and every upload to it does.
    print(
        f"PR report ({PR_CONFIGS:,} configs, {BASE_RUNS} base runs): first {first:.0f} ms, "
        f"then p50 {pct(times, 50):.0f} ms, max {max(times):.0f} ms (target p50 <= 200 ms); "
        f"{report['summary'][:80]}"
    )
    return pct(times, 50)


def result_bytes(url: str) -> tuple[int, int]:
    """(bytes, results): the pages of the result tables and their indexes (every table named
    result* or metric*), after VACUUM on SQLite, as PostgreSQL reports them there."""
    engine = create_db_engine(url)
    try:
        with engine.connect() as conn:
            count = int(conn.exec_driver_sql("SELECT count(*) FROM result").scalar_one())
        if engine.dialect.name == "postgresql":
            with engine.connect() as conn:
                size = conn.exec_driver_sql(
                    "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' "
                    "AND n.nspname = current_schema() "
                    "AND (c.relname LIKE 'result%%' OR c.relname LIKE 'metric%%')"
                ).scalar_one()
            return int(size), count
        db = sqlite3.connect(str(make_url(url).database), isolation_level=None)
        try:
            db.execute("VACUUM")
            (size,) = db.execute(
                "SELECT sum(d.pgsize) FROM dbstat d JOIN sqlite_master m ON m.name = d.name "
                "WHERE m.tbl_name LIKE 'result%' OR m.tbl_name LIKE 'metric%'"
            ).fetchone()
        finally:
            db.close()
        return int(size), count
    finally:
        engine.dispose()


def run_all(url: str, label: str, args: argparse.Namespace) -> dict[str, float]:
    print(f"== {label} ==", flush=True)
    figures: dict[str, float] = {}
    with serve(url) as (base, tokens):
        figures["ingest_rps"] = bench_ingest(
            base, tokens["bench/ingest"], args.rounds, args.uploads
        )
        figures["pr_report_p50_ms"] = bench_pr_report(base, tokens["bench/pr"])
        seed_history(base, tokens["bench/history"], args.results, args.uploads)
        figures.update(bench_history(base))
    size, count = result_bytes(url)
    figures["bytes_per_result"] = size / count
    print(
        f"storage: {size / 2**20:,.1f} MiB for {count:,} results, {size / count:.1f} bytes/result"
    )
    return figures


def run_engines(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    if not args.no_sqlite:
        with tempfile.TemporaryDirectory() as tmp:
            out["SQLite"] = run_all(f"sqlite:///{tmp}/bench.db", "SQLite", args)
    if not (args.postgres or args.postgres_url):
        return out
    if args.postgres_url:
        context: Any = nullcontext(args.postgres_url)
    else:
        bindir = find_binaries()
        if bindir is None:
            raise SystemExit("no PostgreSQL binaries found: pass --postgres-url")
        context = throwaway_postgres(bindir)
    with context as admin:
        with connect(admin) as conn:
            conn.execute("DROP DATABASE IF EXISTS cpci_bench")
            conn.execute("CREATE DATABASE cpci_bench")
        url = make_url(admin).set(database="cpci_bench").render_as_string(hide_password=False)
        out["PostgreSQL"] = run_all(url, "PostgreSQL", args)
    return out


def connect(url: str) -> psycopg.Connection[Any]:
    u = make_url(url)
    return psycopg.connect(
        host=u.host, port=u.port, user=u.username, dbname=u.database, autocommit=True
    )


def run_revision(rev: str, argv: list[str]) -> dict[str, dict[str, float]]:
    """This benchmark's figures on the service as it was at `rev`: a git worktree of it,
    imported ahead of this checkout in a child process that prints its figures as JSON."""
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(
            ["git", "-C", str(root), "worktree", "add", "--detach", str(tree), rev],
            check=True,
            capture_output=True,
        )
        try:
            env = {**os.environ, "PYTHONPATH": str(tree)}
            with tempfile.NamedTemporaryFile(suffix=".json") as out:
                subprocess.run(
                    [sys.executable, __file__, *argv, "--json", out.name], env=env, check=True
                )
                return dict(json.loads(Path(out.name).read_text()))
        finally:
            subprocess.run(
                ["git", "-C", str(root), "worktree", "remove", "--force", str(tree)], check=True
            )


def print_side_by_side(rev: str, before: dict[str, Any], after: dict[str, Any]) -> None:
    print(f"\n== {rev} vs this checkout ==")
    for engine in after:
        print(f"{engine}:")
        print(f"  {'':28} {rev:>12} {'now':>12} {'ratio':>7}  target")
        for key, (name, target) in TARGETS.items():
            old, new = before.get(engine, {}).get(key), after[engine].get(key)
            if new is None:
                continue
            ratio = f"{new / old:.2f}" if old else "-"
            shown = f"{old:12,.1f}" if old is not None else f"{'-':>12}"
            print(f"  {name:28} {shown} {new:12,.1f} {ratio:>7}  {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--postgres", action="store_true", help="also run on PostgreSQL")
    parser.add_argument("--postgres-url", help="an admin URL (default: a throwaway server)")
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument(
        "--results", type=int, default=1_000_000, help="history results (1,000 configs)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="timed ingest runs of 80,000")
    parser.add_argument("--uploads", type=int, default=16, help="uploads at once")
    parser.add_argument("--compare", metavar="REV", help="also run at git revision REV")
    parser.add_argument("--json", metavar="PATH", help="write the figures to PATH as JSON")
    args = parser.parse_args()
    argv = [a for a in sys.argv[1:]]
    if args.compare:
        i = argv.index("--compare")
        argv = argv[:i] + argv[i + 2 :]
        before = run_revision(args.compare, argv)
    after = run_engines(args)
    if args.json:
        Path(args.json).write_text(json.dumps(after))
    if args.compare:
        print_side_by_side(args.compare, before, after)


if __name__ == "__main__":
    main()
