"""The uploads-per-hour quota's query (`nth_latest_upload`) on SQLite as a repository's history
grows: the price every new shard pays for a quota that replicas agree on.

Cases: every shard of the repository inside the hour (a busy repository at its quota), all of
them older (a quiet one with a long history), and a small repository beside a busy one. The
query walks the shard upload-time index (migration 0005) newest first, so it costs the
service's shards of the last hour at most, never the repository's whole history.

    python benchmarks/upload_quota.py [--shards 20000] [--quota 10000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from sqlmodel import Session

from cpci.server.core.db import create_db_engine
from cpci.server.core.migrate import upgrade
from cpci.server.core.quotas import WINDOW
from cpci.server.crud.quotas import nth_latest_upload
from cpci.server.models import utcnow


def fill(url: str, shards: dict[int, tuple[int, timedelta]]) -> None:
    """Repository id -> (shards, age): one run per shard, as a busy matrix uploads them."""
    engine = create_db_engine(url)
    upgrade(engine)
    now = utcnow()
    raw = engine.raw_connection()
    cur = raw.cursor()
    cur.execute(
        "INSERT INTO environment (fingerprint, torch, cuda, nccl, gpu, backend) "
        "VALUES ('e', '', '', '', '', '')"
    )
    run_id = 0
    for repo, (count, age) in shards.items():
        repository = (repo, f"acme/r{repo}", now)
        cur.execute("INSERT INTO repository (id, name, created_at) VALUES (?, ?, ?)", repository)
        runs, rows = [], []
        for i in range(count):
            run_id += 1
            # As SQLAlchemy stores a UTC timestamp on SQLite.
            when = (now - age - timedelta(seconds=i * 0.01)).strftime("%Y-%m-%d %H:%M:%S.%f")
            runs.append((run_id, repo, str(run_id), 1, "c" * 40, 1, when))
            rows.append((run_id, "", 0, "h", 1, 0, when))
        cur.executemany(
            'INSERT INTO run (id, repository_id, ci_run_id, ci_attempt, "commit", shard_total,'
            " created_at, fork, scope) VALUES (?, ?, ?, ?, ?, ?, ?, 0, 'branch')",
            runs,
        )
        cur.executemany(
            "INSERT INTO shard (run_id, leg, shard_index, body_sha256, environment_id, "
            "result_count, uploaded_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    raw.commit()
    raw.close()
    engine.dispose()


def timed(url: str, repo: int, quota: int, repeat: int = 20) -> float:
    engine = create_db_engine(url)
    with Session(engine) as session:
        now = utcnow()
        start = time.perf_counter()
        for _ in range(repeat):
            nth_latest_upload(session=session, repo_id=repo, n=quota, since=now - WINDOW)
        elapsed = (time.perf_counter() - start) / repeat
    engine.dispose()
    return elapsed * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=20_000)
    parser.add_argument("--quota", type=int, default=10_000)
    args = parser.parse_args()
    n, quota = args.shards, args.quota
    cases = {
        f"{n:,} shards inside the hour": ({1: (n, timedelta(0))}, 1),
        f"{n:,} shards, all older": ({1: (n, timedelta(hours=2))}, 1),
        f"10 shards beside {n:,} of another repository": (
            {1: (n, timedelta(0)), 2: (10, timedelta(0))},
            2,
        ),
    }
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, (shards, repo)) in enumerate(cases.items()):
            url = f"sqlite:///{Path(tmp) / f'{i}.db'}"
            fill(url, shards)
            print(f"{name:<45} {timed(url, repo, quota):8.2f} ms per upload (quota {quota:,})")


if __name__ == "__main__":
    main()
