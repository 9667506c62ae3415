"""Compaction: bytes per result before and after rolling old runs up, and results compacted/s.

Uploads `--runs` runs of `--configs` configs through the service's ingest (a test client over
the real app), `--per-day` runs a UTC day, every day but the newest made old; then
`crud.compact.compact` rolls the old days up. Bytes are the result tables' (result,
result_detail, result_rollup: heap and indexes) on SQLite (`dbstat`, after VACUUM) and
PostgreSQL (`pg_total_relation_size`, after VACUUM FULL), over the results uploaded, before and
after. Prints one line per engine with `uptime`'s load; gates nothing.

    .venv/bin/python benchmarks/compact.py --runs 60 --configs 1000
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import psycopg
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text
from sqlmodel import Session

from cpci.server.app import create_app
from cpci.server.core import migrate
from cpci.server.core.config import Settings
from cpci.server.core.db import create_db_engine
from cpci.server.crud.compact import BATCH_RESULTS, compact
from cpci.server.crud.tokens import create_token
from cpci.server.devpg import find_binaries, throwaway_postgres
from cpci.server.models import utcnow

TABLES = ("result", "result_detail", "result_rollup")


def envelope(run: int, configs: int, rng: random.Random) -> dict[str, object]:
    """One shard of `configs` results: 3% fail with one of a few errors, 1% flake."""
    results = []
    for c in range(configs):
        roll = rng.random()
        outcome = "failed" if roll < 0.03 else "passed"
        result: dict[str, object] = {
            "nodeid": f"tests/test_cp.py::test_attn[cfg{c}]",
            "world_size": 2,
            "outcome": outcome,
            "duration_s": rng.lognormvariate(0, 0.5),
            "metrics": {"max_abs_err": rng.random() * 1e-3},
            "flaky": 0.03 <= roll < 0.04,
        }
        if outcome == "failed":
            message = f"AssertionError: max diff {rng.randrange(4)} at rank 1"
            result["rank_errors"] = [{"rank": 1, "phase": "call", "message": message}]
        results.append(result)
    return {
        "repository": "bench/compact",
        "commit": f"{run + 1:040x}",
        "branch": "main",
        "ci_run_id": str(10_000 + run),
        "environment": {"torch": "2.4.0", "cuda": "12.4", "gpu": "H100", "backend": "nccl"},
        "results": results,
    }


def seed(url: str, runs: int, configs: int, per_day: int) -> Engine:
    engine = create_db_engine(url)
    migrate.upgrade(engine)
    with Session(engine) as session:
        token = create_token(session=session, repository="bench/compact", name="bench").token
        session.commit()
    rng = random.Random(23)
    with TestClient(create_app(Settings(database_url=url), engine=engine)) as client:
        client.headers["Authorization"] = f"Bearer {token}"
        for run in range(runs):
            response = client.post("/api/v1/uploads", json=envelope(run, configs, rng))
            assert response.status_code == 201, response.text
    days = (runs + per_day - 1) // per_day
    with Session(engine) as session:
        for run in range(runs):
            age = days - run // per_day  # the newest day's runs stay a day old: not compacted
            session.execute(
                text("UPDATE run SET created_at = :at WHERE ci_run_id = :ci"),
                {"at": utcnow() - timedelta(days=age, minutes=runs - run), "ci": str(10_000 + run)},
            )
        session.commit()
    return engine


def table_bytes(engine: Engine) -> dict[str, int]:
    """Each result table's bytes, heap and indexes, after reclaiming what deletes freed."""
    if engine.dialect.name == "sqlite":
        conn = sqlite3.connect(str(engine.url.database), isolation_level=None)
        try:
            conn.execute("VACUUM")
            return {
                table: int(
                    conn.execute(
                        "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name IN "
                        "(SELECT name FROM sqlite_master WHERE tbl_name = ?)",
                        (table,),
                    ).fetchone()[0]
                )
                for table in TABLES
            }
        finally:
            conn.close()
    plain = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(plain, autocommit=True) as c:
        c.execute(f"VACUUM FULL ANALYZE {', '.join(TABLES)}")
        return {
            table: int(c.execute("SELECT pg_total_relation_size(%s)", (table,)).fetchone()[0])  # type: ignore[index]
            for table in TABLES
        }


def bench(label: str, url: str, args: argparse.Namespace) -> None:
    engine = seed(url, args.runs, args.configs, args.per_day)
    results = args.runs * args.configs
    before = sum(table_bytes(engine).values())
    done = compact(engine=engine, before=utcnow() - timedelta(days=2), batch_results=args.batch)
    again = compact(engine=engine, before=utcnow() - timedelta(days=2))
    tables = table_bytes(engine)
    after = sum(tables.values())
    with Session(engine) as session:
        rollups = session.execute(text("SELECT COUNT(*) FROM result_rollup")).scalar_one()
    engine.dispose()
    load = os.getloadavg()
    print(
        f"{label:10} {results:>8} results ({args.runs} runs x {args.configs} configs, "
        f"{args.per_day}/day): {before / results:6.1f} B/result before, "
        f"{after / results:6.1f} after ({done.results} compacted into {rollups} daily rows, "
        f"{done.results / max(rollups, 1):.1f} results a row, "
        f"{tables['result_rollup'] / max(done.results, 1):.1f} B per compacted result) | "
        f"{done.results_per_s:,.0f} results/s compacted in {done.batches} batches | "
        f"rerun: {again.results} | load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}",
        flush=True,
    )


@contextmanager
def postgres_database() -> Iterator[str | None]:
    bindir = find_binaries()
    if bindir is None:
        yield None
        return
    with throwaway_postgres(bindir) as admin:
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute("CREATE DATABASE bench")
        yield admin.rsplit("/", 1)[0] + "/bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--configs", type=int, default=1000)
    parser.add_argument("--per-day", type=int, default=20, help="runs a day (a team's CI)")
    parser.add_argument("--batch", type=int, default=BATCH_RESULTS)
    parser.add_argument("--engine", choices=["sqlite", "postgresql", "both"], default="both")
    args = parser.parse_args()
    if args.engine in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as tmp:
            bench("sqlite", f"sqlite:///{Path(tmp) / 'bench.db'}", args)
    if args.engine in ("postgresql", "both"):
        with postgres_database() as url:
            if url is None:
                print("postgresql: no server binaries found (CPCI_TEST_PG_BIN)", file=sys.stderr)
            else:
                bench("postgresql", url, args)


if __name__ == "__main__":
    main()
