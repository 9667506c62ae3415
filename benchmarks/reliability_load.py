"""The service under load, full size, on SQLite and PostgreSQL: 32 concurrent uploaders x 20
shards each against one `cpci serve` process, every 5th shard resent; then SIGKILLs of the
service mid-upload (body half sent, and at random points while a whole body is stored) with
restarts. Prints uploads, results lost or doubled (must be 0), p50/p95/max upload latency, and
the kill rounds.

    python benchmarks/reliability_load.py [--uploaders 32] [--shards 20] [--results 50]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.reliability, shared

from cpci.server.devpg import find_binaries, throwaway_postgres
from tests.reliability.service import (
    Served,
    check_load,
    count_stored,
    kill_mid_upload,
    load,
    prepare_database,
)


@contextmanager
def database(kind: str, tmp: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{tmp / 'load.db'}"
        return
    bindir = find_binaries()
    if bindir is None:
        raise SystemExit("PostgreSQL binaries not found (initdb, pg_ctl)")
    with throwaway_postgres(bindir) as admin:
        u = make_url(admin)
        with psycopg.connect(
            host=u.host, port=u.port, user=u.username, dbname="postgres", autocommit=True
        ) as conn:
            conn.execute("CREATE DATABASE cpci_load")
        yield u.set(database="cpci_load").render_as_string(hide_password=False)


def one_engine(kind: str, args: argparse.Namespace) -> bool:
    with tempfile.TemporaryDirectory() as name, database(kind, Path(name)) as url:
        tmp = Path(name)
        token = prepare_database(url)
        served = Served(url, tmp / "serve.log")
        served.start()
        try:
            report = load(
                served.url,
                token,
                tmp / "spool",
                uploaders=args.uploaders,
                shards=args.shards,
                results=args.results,
            )
            stored = count_stored(url)
            problems = check_load(report, stored)
            uploads = len(report.receipts)
            lost = report.expected_results - stored.results
            print(
                f"[{kind}] {args.uploaders} uploaders x {args.shards} shards x "
                f"{args.results} results: {uploads} uploads in {report.wall_s:.1f} s"
            )
            print(
                f"[{kind}] results stored {stored.results}/{report.expected_results} "
                f"(lost or doubled: {lost}), shards {stored.shards}"
            )
            print(
                f"[{kind}] upload latency p50 {report.percentile(50) * 1000:.0f} ms, "
                f"p95 {report.percentile(95) * 1000:.0f} ms, "
                f"max {max(report.latencies_s) * 1000:.0f} ms"
            )
            rng = random.Random(args.seed)
            rounds = [(0.5, 0.0)] + [(1.0, rng.uniform(0, 1.5)) for _ in range(args.kills - 1)]
            committed = 0
            for i, (fraction, delay) in enumerate(rounds):
                kill = kill_mid_upload(
                    served,
                    token,
                    tmp / f"kill-spool-{i}",
                    run=f"kill-{i}",
                    results=args.kill_results,
                    fraction=fraction,
                    store_delay_s=delay,
                )
                committed += kill.committed_before_kill
                problems += kill.problems
            print(
                f"[{kind}] {len(rounds)} SIGKILL rounds ({args.kill_results} results each): "
                f"{committed} had committed before the kill, "
                f"{len(rounds) - committed} completed by the retry; restarts {served.starts - 1}"
            )
        finally:
            served.stop()
    for problem in problems:
        print(f"[{kind}] PROBLEM: {problem}")
    print(f"[{kind}] {'OK' if not problems else f'{len(problems)} problem(s)'}")
    return not problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uploaders", type=int, default=32)
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--results", type=int, default=50, help="results per shard")
    parser.add_argument("--kills", type=int, default=5, help="SIGKILL rounds per engine")
    parser.add_argument("--kill-results", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--engines", default="sqlite,postgresql")
    args = parser.parse_args()
    ok = [one_engine(kind, args) for kind in args.engines.split(",")]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
