"""Result service benchmark: ingest throughput vs raw executemany, history latency over 1M
results, and the PR report for 10,000 configs, on SQLite (and PostgreSQL with --postgres).

    .venv/bin/python benchmarks/service.py [--postgres] [--history-rows 1000000]

Targets (printed next to the figures, never enforced): ingest >= 25% of the raw executemany rate,
history p95 <= 25 ms, PR report <= 300 ms. All traffic is real HTTP to uvicorn on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
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
from cpci.server.crud.ingest import RESULT_COLUMNS
from cpci.server.crud.tokens import create_token
from cpci.server.devpg import find_binaries, free_port, throwaway_postgres

SHARDS, PER_SHARD = 10, 5_000
PR_CONFIGS, BASE_RUNS = 10_000, 5


def record(i: int, outcome: str = "passed", duration: float = 1.0) -> dict[str, Any]:
    return {
        "nodeid": f"tests/test_cp.py::test_attn[cfg{i}]",
        "world_size": 2,
        "outcome": outcome,
        "duration_s": duration,
        "metrics": {"max_abs_err": 1e-4},
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
def serve(url: str) -> Iterator[tuple[str, str]]:
    """uvicorn on a free loopback port over `url`; yields the base URL and an upload token."""
    engine = create_db_engine(url)
    upgrade(engine)
    with Session(engine) as session:
        token = create_token(session=session, repository="bench/ingest").token
        for repo in ("bench/history", "bench/pr"):
            create_token(session=session, repository=repo)
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
        yield base, token
    finally:
        server.should_exit = True
        thread.join()
        engine.dispose()


def bench_ingest(
    base: str, token: str, raw_insert: Callable[[list[tuple[Any, ...]]], float]
) -> None:
    # Ten CI runs of the same 5,000 configs: the first upload creates them, the rest find them,
    # as in a repository's steady state.
    bodies = [
        envelope(
            "bench/ingest", f"r{s}", f"{s + 1:040x}", 0, 1, [record(i) for i in range(PER_SHARD)]
        )
        for s in range(SHARDS)
    ]
    headers = {"Authorization": f"Bearer {token}", "content-type": "application/json"}
    with httpx.Client(base_url=base, headers=headers, timeout=120) as http:
        start = time.perf_counter()
        each = []
        for body in bodies:
            t0 = time.perf_counter()
            response = http.post("/api/v1/uploads", content=body)
            each.append(time.perf_counter() - t0)
            assert response.status_code == 201, response.text
        api_s = time.perf_counter() - start
    rows = [
        (
            1,
            1,
            1 + i,
            1,
            "passed",
            1.0,
            1,
            False,
            None,
            None,
            json.dumps({"max_abs_err": 1e-4}),
            None,
        )
        for i in range(SHARDS * PER_SHARD)
    ]
    raw_s = raw_insert(rows)
    n = SHARDS * PER_SHARD
    api_rate, raw_rate = n / api_s, n / raw_s
    print(
        f"ingest: {api_rate:,.0f} results/s over the API ({SHARDS} uploads of {PER_SHARD:,}); "
        f"raw executemany {raw_rate:,.0f} rows/s; ratio {api_rate / raw_rate:.0%} "
        f"(target >= 25%); first upload (creates the configs) {each[0] * 1000:.0f} ms, "
        f"later ones median {statistics.median(each[1:]) * 1000:.0f} ms"
    )


def raw_sqlite(rows: list[tuple[Any, ...]]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        conn = sqlite3.connect(Path(tmp) / "raw.db", isolation_level=None)
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL"):
            conn.execute(f"PRAGMA {pragma}")
        conn.execute(
            "CREATE TABLE result (id INTEGER PRIMARY KEY, run_id INT, shard_id INT, config_id INT, "
            "environment_id INT, outcome VARCHAR(16), duration_s FLOAT, attempt INT, flaky BOOL, "
            "isolation VARCHAR(32), rank_errors JSON, metrics JSON, batch JSON)"
        )
        conn.execute("CREATE INDEX ix1 ON result (config_id, id)")
        conn.execute("CREATE INDEX ix2 ON result (run_id)")
        conn.execute("CREATE INDEX ix3 ON result (shard_id)")
        names, marks = ", ".join(RESULT_COLUMNS), ", ".join("?" * len(RESULT_COLUMNS))
        sql = f"INSERT INTO result ({names}) VALUES ({marks})"
        start = time.perf_counter()
        for i in range(0, len(rows), PER_SHARD):
            conn.execute("BEGIN")
            conn.executemany(sql, rows[i : i + PER_SHARD])
            conn.execute("COMMIT")
        elapsed = time.perf_counter() - start
        conn.close()
    return elapsed


def raw_postgres(admin_url: str) -> Callable[[list[tuple[Any, ...]]], float]:
    def run(rows: list[tuple[Any, ...]]) -> float:
        with connect(admin_url) as conn:
            conn.execute("DROP TABLE IF EXISTS raw_result")
            conn.execute(
                "CREATE TABLE raw_result (id BIGSERIAL PRIMARY KEY, run_id INT, shard_id INT, "
                "config_id INT, environment_id INT, outcome VARCHAR(16), duration_s FLOAT, "
                "attempt INT, flaky BOOL, isolation VARCHAR(32), rank_errors JSON, metrics JSON, "
                "batch JSON)"
            )
            for n, cols in enumerate(("config_id, id", "run_id", "shard_id")):
                conn.execute(f"CREATE INDEX raw_ix{n} ON raw_result ({cols})")
            sql = (
                f"INSERT INTO raw_result ({', '.join(RESULT_COLUMNS)}) "
                f"VALUES ({', '.join(['%s'] * len(RESULT_COLUMNS))})"
            )
            start = time.perf_counter()
            for i in range(0, len(rows), PER_SHARD):
                with conn.transaction(), conn.cursor() as cur:
                    cur.executemany(sql, rows[i : i + PER_SHARD])
            return time.perf_counter() - start

    return run


def connect(url: str) -> psycopg.Connection[Any]:
    u = make_url(url)
    return psycopg.connect(
        host=u.host, port=u.port, user=u.username, dbname=u.database, autocommit=True
    )


def seed_history(url: str, total: int) -> None:
    """`total` results of 1,000 configs in 1,000-config runs, written straight to the tables."""
    configs, runs = 1_000, total // 1_000
    engine = create_db_engine(url)
    with engine.begin() as conn:
        repo = conn.exec_driver_sql("SELECT id FROM repository WHERE name='bench/history'").scalar()
        conn.exec_driver_sql(
            "INSERT INTO environment (fingerprint, torch) VALUES ('bench', '2.4.0')"
        )
        env = conn.exec_driver_sql("SELECT id FROM environment WHERE fingerprint='bench'").scalar()
        cur = conn.connection.cursor()
        mark = "%s" if engine.dialect.name == "postgresql" else "?"

        def many(sql: str, rows: list[tuple[Any, ...]]) -> None:
            cur.executemany(sql.replace("?", mark), rows)

        many(
            "INSERT INTO config (repository_id, key, nodeid, world_size) VALUES (?, ?, ?, 2)",
            [(repo, f"t::c[{i}]@2", f"t::c[{i}]") for i in range(configs)],
        )
        many(
            'INSERT INTO run (repository_id, ci_run_id, ci_attempt, "commit", branch, shard_total, '
            "fork, scope, created_at) "
            "VALUES (?, ?, 1, ?, 'main', 1, FALSE, 'branch', CURRENT_TIMESTAMP)",
            [(repo, f"h{r}", f"{r:040x}") for r in range(runs)],
        )
        run_ids = [
            row[0]
            for row in conn.exec_driver_sql(
                f"SELECT id FROM run WHERE repository_id={repo} ORDER BY id"
            )
        ]
        many(
            "INSERT INTO shard (run_id, leg, shard_index, body_sha256, environment_id, "
            "result_count, uploaded_at) VALUES (?, '', 0, 'x', ?, ?, CURRENT_TIMESTAMP)",
            [(r, env, configs) for r in run_ids],
        )
        shard_of = dict(
            conn.exec_driver_sql(f"SELECT run_id, id FROM shard WHERE run_id >= {run_ids[0]}").all()
        )
        config_ids = [
            row[0]
            for row in conn.exec_driver_sql(
                f"SELECT id FROM config WHERE repository_id={repo} ORDER BY id"
            )
        ]
        sql = (
            "INSERT INTO result (run_id, shard_id, config_id, environment_id, outcome, "
            "duration_s, attempt, flaky) VALUES (?, ?, ?, ?, ?, 1.0, 1, ?)"
        )
        for r in run_ids:
            outcome = "failed" if r % 7 == 0 else "passed"
            many(sql, [(r, shard_of[r], c, env, outcome, False) for c in config_ids])
    engine.dispose()


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


def bench_history(base: str, url: str, total: int) -> None:
    start = time.perf_counter()
    seed_history(url, total)
    print(f"history: seeded {total:,} results in {time.perf_counter() - start:.1f} s")
    with httpx.Client(base_url=base, timeout=60) as http:
        path = "/api/v1/repos/bench/history/history"
        timed(http, path, 5, config="t::c[500]@2")  # warm up
        first = timed(http, path, 200, config="t::c[500]@2", limit=50)
        page = http.get(path, params={"config": "t::c[500]@2", "limit": 400}).json()
        cursor = page["next_cursor"] or page["entries"][-1]["result_id"]
        deep = timed(http, path, 100, config="t::c[500]@2", limit=50, before=cursor)
    print(
        f"history: first page (50) p50 {pct(first, 50):.1f} ms, p95 {pct(first, 95):.1f} ms; "
        f"a deeper page p50 {pct(deep, 50):.1f} ms, p95 {pct(deep, 95):.1f} ms "
        "(target p95 <= 25 ms)"
    )


def bench_pr_report(base: str, token_repo: str) -> None:
    headers = {"Authorization": f"Bearer {token_repo}", "content-type": "application/json"}
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
        times = timed(http, path, 10)
    # The first request reads the baseline; later ones find it cached, as every PR on the
    # same base and every upload to it does.
    print(
        f"PR report ({PR_CONFIGS:,} configs, {BASE_RUNS} base runs): first {first:.0f} ms, "
        f"then p50 {pct(times, 50):.0f} ms, max {max(times):.0f} ms (target <= 300 ms); "
        f"{report['summary'][:80]}"
    )


def run_all(url: str, label: str, history_rows: int, raw: Callable[[list[Any]], float]) -> None:
    print(f"== {label} ==")
    with serve(url) as (base, token):
        bench_ingest(base, token, raw)
        with Session(create_db_engine(url)) as session:
            pr_token = create_token(session=session, repository="bench/pr").token
            session.commit()
        bench_pr_report(base, pr_token)
        bench_history(base, url, history_rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--postgres", action="store_true", help="also run on PostgreSQL")
    parser.add_argument("--postgres-url", help="an admin URL (default: a throwaway server)")
    parser.add_argument("--history-rows", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_all(f"sqlite:///{tmp}/bench.db", "SQLite", args.history_rows, raw_sqlite)
    if not (args.postgres or args.postgres_url):
        return
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
        run_all(url, "PostgreSQL", args.history_rows, raw_postgres(url))


if __name__ == "__main__":
    main()
