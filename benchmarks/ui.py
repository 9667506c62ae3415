"""Web UI benchmark: server time of the dashboard and of a config page over 1,000,000 results
in SQLite, measured over real HTTP against uvicorn on 127.0.0.1.

    .venv/bin/python benchmarks/ui.py [--results 1000000] [--repeat 20]

The history: 2,000 configs, 500 CI runs of 2 shards each (490 on main, 10 pull requests), with
metrics, batches, runners and start/end times like real uploads; ~1% of configs flaky and a
few always broken. Rows are written straight to the tables (the upload path has its own
benchmark in benchmarks/service.py). Target (printed, never enforced): <= 150 ms each. The
dashboard is shown cold (first request after start: the per-shard digests are computed) and
warm (the digests are remembered; runs and shards are still read every time).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import uvicorn
from sqlmodel import Session

from cpci.server import Settings, create_app
from cpci.server.core.db import create_db_engine
from cpci.server.core.migrate import upgrade
from cpci.server.crud.tokens import create_token
from cpci.server.devpg import free_port
from cpci.server.packed import OUTCOME_CODE, pack_batch, pack_metrics

REPO = "bench/ui"
CONFIGS, SHARDS, PULLS = 2_000, 2, 10
TARGET_MS = 150.0
START = datetime(2025, 1, 1, tzinfo=timezone.utc)
METRIC_IDS = {"max_abs_err": 1}


def outcome(config: int, run: int) -> str:
    if config % 401 == 3:
        return "failed"  # broken
    if config % 97 == 0 and (run * 7 + config) % 5 == 0:
        return "failed"  # flaky
    return "skipped" if config % 251 == 5 else "passed"


def seed(path: Path, results: int, configs: int = CONFIGS, shards: int = SHARDS) -> None:
    """`results` results of `configs` configs in runs of `shards` shards, written straight to
    the tables: every column without a default is given (the tables' NOT NULL columns grow with
    the schema, and this seed must grow with them)."""
    runs = results // configs
    main_runs = runs - PULLS
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("BEGIN")
    conn.execute("INSERT INTO repository (name, created_at) VALUES (?, ?)", (REPO, START))
    conn.execute(
        "INSERT INTO environment (fingerprint, torch, cuda, gpu, backend) "
        "VALUES ('bench', '2.4.0', '12.4', 'H100', 'nccl')"
    )
    conn.executemany(
        "INSERT INTO config (repository_id, key, nodeid, world_size, params) "
        "VALUES (1, ?, ?, 2, ?)",
        [(f"t::c[{c}]@2", f"t::c[{c}]", json.dumps({"n": c})) for c in range(configs)],
    )
    conn.executemany(
        "INSERT INTO metric_name (id, name) VALUES (?, ?)",
        [(pk, name) for name, pk in METRIC_IDS.items()],
    )
    per_shard = configs // shards
    next_id = 0
    for r in range(runs):
        pull = r - main_runs + 1 if r >= main_runs else None
        commit = f"{r + 1:040x}"
        when = START + timedelta(minutes=30 * r)
        run_id = conn.execute(
            'INSERT INTO run (repository_id, ci_run_id, ci_attempt, "commit", branch, '
            "pull_request, base_commit, shard_total, created_at, scope, fork) "
            "VALUES (1, ?, 1, ?, ?, ?, ?, ?, ?, ?, 0)",
            (
                str(10_000 + r),
                commit,
                "main" if pull is None else f"pr-{pull}",
                pull,
                f"{main_runs:040x}" if pull else None,
                shards,
                when,
                "branch" if pull is None else "pr",
            ),
        ).lastrowid
        for s in range(shards):
            shard_id = conn.execute(
                "INSERT INTO shard (run_id, shard_index, leg, body_sha256, environment_id, "
                "runner_name, runner_labels, started_at, ended_at, result_count, uploaded_at) "
                "VALUES (?, ?, '', 'x', 1, ?, '[\"gpu\"]', ?, ?, ?, ?)",
                (
                    run_id,
                    s,
                    f"gpu-{(r + s) % 8}",
                    when,
                    when + timedelta(minutes=20),
                    per_shard,
                    when + timedelta(minutes=21),
                ),
            ).lastrowid
            rows, details = [], []
            for c in range(s * per_shard, (s + 1) * per_shard):
                result = outcome(c, r)
                next_id += 1
                if result == "failed":
                    message = f"max abs err {r * 1e-3:.4f} > tol at 0x{c:x}"
                    errors = [{"rank": 0, "phase": "call", "message": message}]
                    details.append((next_id, json.dumps(errors)))
                batch = {"index": (c % per_shard) // 16, "world": 0, "size": 16}
                rows.append(
                    (
                        next_id,
                        shard_id,
                        run_id,
                        c + 1,
                        OUTCOME_CODE[result],
                        1.0 + (c % 50) * 0.1 + (r % 7) * 0.01,
                        pack_metrics({"max_abs_err": 1e-4 * (1 + (r + c) % 9)}, METRIC_IDS),
                        pack_batch(batch),
                    )
                )
            conn.executemany(
                "INSERT INTO result (id, shard_id, run_id, config_id, outcome, duration_s, "
                "metrics, batch, attempt, isolation, flaky, arrival) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, 0, 0, 0)",
                rows,
            )
            conn.executemany(
                "INSERT INTO result_detail (result_id, rank_errors) VALUES (?, ?)", details
            )
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    conn.close()


@contextmanager
def serve(url: str) -> Iterator[str]:
    engine = create_db_engine(url)
    app = create_app(Settings(database_url=url), engine=engine)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise SystemExit("uvicorn did not start within 30 s")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join()
        engine.dispose()


def timed(http: httpx.Client, path: str, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = http.get(path)
        out.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, response.text[:500]
    return out


def after_uploads(http: httpx.Client, url: str, count: int) -> list[float]:
    """Upload a new main run (2,000 results) through the API, then time the dashboard: its
    remembered flakiness is stale and recomputed, and the new shards are digested."""
    engine = create_db_engine(url)
    with Session(engine) as session:
        token = create_token(session=session, repository=REPO, name="bench").token
        session.commit()
    engine.dispose()
    headers = {"Authorization": f"Bearer {token}"}
    out = []
    for n in range(count):
        body = {
            "schema": "cpci.run/1",
            "repository": REPO,
            "commit": f"{n + 1:040x}",
            "branch": "main",
            "ci_run_id": f"new-{n}",
            "shard_total": 1,
            "results": [
                {
                    "nodeid": f"t::c[{c}]",
                    "world_size": 2,
                    "outcome": outcome(c, 1000 + n),
                    "duration_s": 1.0,
                }
                for c in range(CONFIGS)
            ],
        }
        response = http.post("/api/v1/uploads", json=body, headers=headers)
        assert response.status_code == 201, response.text[:500]
        out.extend(timed(http, f"/ui/{REPO}", 1))
    return out


def report(label: str, times: list[float]) -> None:
    p50 = statistics.median(times)
    p95 = sorted(times)[max(0, round(len(times) * 0.95) - 1)]
    verdict = "meets" if p95 <= TARGET_MS else "MISSES"
    print(
        f"{label:<34} p50 {p50:7.1f} ms  p95 {p95:7.1f} ms  max {max(times):7.1f} ms  "
        f"({verdict} the {TARGET_MS:.0f} ms target, p95/target {p95 / TARGET_MS:.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ui.db"
        url = f"sqlite:///{path}"
        engine = create_db_engine(url)
        upgrade(engine)
        engine.dispose()
        start = time.perf_counter()
        seed(path, args.results)
        elapsed = time.perf_counter() - start
        runs = args.results // CONFIGS
        print(
            f"seeded {args.results:,} results ({CONFIGS:,} configs, {runs} runs) in {elapsed:.1f} s"
        )
        flaky = "t::c[97]@2"
        pages = {
            "dashboard (HTML)": f"/ui/{REPO}",
            "dashboard (JSON twin)": f"/api/v1/repos/{REPO}/dashboard",
            "config page (HTML)": f"/ui/{REPO}/config?config={flaky}",
            "config page (JSON twin)": f"/api/v1/repos/{REPO}/config?config={flaky}",
            # The newest main run (the pull requests' runs come after the main ones).
            "run page (HTML, 2,000 results)": f"/ui/{REPO}/runs/{10_000 + runs - PULLS - 1}"
            "?outcome=failed",
        }
        with serve(url) as base, httpx.Client(base_url=base, timeout=120) as http:
            cold = timed(http, pages["dashboard (HTML)"], 1)[0]
            print(f"{'dashboard (HTML), cold':<34} {cold:7.1f} ms (first request: digests built)")
            for label, page in pages.items():
                timed(http, page, 2)  # warm up
                report(label, timed(http, page, args.repeat))
            report("dashboard right after an upload", after_uploads(http, url, 5))


if __name__ == "__main__":
    main()
