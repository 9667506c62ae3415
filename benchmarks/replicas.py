"""Two `cpci serve` replicas on one PostgreSQL behind a round-robin proxy, full size.

The scenario of `tests/reliability/test_replicas.py` (`tests/reliability/replicas.py`): a base
run, 16 shards of one PR run uploaded at once across both replicas (resends and one shard twice
at the same moment), replica 0 SIGKILLed with an upload open to it and started again, webhook
deliveries for the PR (each GUID twice) worked off by both workers, reads through a read-only
role. Prints results/s of the PR run's upload, the receipts, connections per replica, GitHub
writes per replica and every check that failed (none is the pass).

    python benchmarks/replicas.py [--results 5000] [--deliveries 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.reliability, shared

from cpci.server.devpg import find_binaries, throwaway_postgres
from tests.reliability.replicas import SHARDS, run_replicas


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=int, default=5000, help="results per shard")
    parser.add_argument("--deliveries", type=int, default=16, help="distinct webhook deliveries")
    parser.add_argument("--rounds", type=int, default=3, help="fresh databases, one run each")
    args = parser.parse_args()
    bindir = find_binaries()
    if bindir is None:
        raise SystemExit("PostgreSQL binaries not found (initdb, pg_ctl)")
    failed = 0
    with throwaway_postgres(bindir) as admin:
        for round_ in range(args.rounds):
            u = make_url(admin)
            name = f"cpci_replicas_{round_}"
            with psycopg.connect(
                host=u.host, port=u.port, user=u.username, dbname="postgres", autocommit=True
            ) as conn:
                conn.execute(f"CREATE DATABASE {name}")
            url = u.set(database=name).render_as_string(hide_password=False)
            with tempfile.TemporaryDirectory() as tmp:
                run = run_replicas(url, Path(tmp), results=args.results, deliveries=args.deliveries)
            print(
                f"round {round_}: {SHARDS} shards x {args.results} results = {run.results} in "
                f"{run.upload_wall_s:.2f} s: {run.results_per_s:,.0f} results/s through the proxy "
                f"(a SIGKILL and restart of replica 0 included, {run.cut_on_kill} upload(s) cut)"
            )
            print(
                f"round {round_}: receipts {run.statuses}; connections per replica "
                f"{run.connections}; GitHub writes per replica {run.writes_by_replica}; "
                f"deliveries settled {run.webhook_wait_s:.2f} s after the last upload"
            )
            print(f"round {round_}: checks " + ("all passed" if not run.problems else "FAILED"))
            for problem in run.problems:
                print(f"  {problem}")
            failed += bool(run.problems)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
