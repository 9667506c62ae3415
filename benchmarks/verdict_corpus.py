"""Verdict corpus at full size: seeded CI histories with known truth (200 configs, 40 main runs,
40 PRs by default) uploaded over real HTTP to a real `cpci serve`, each figure printed with its
goal (never enforced: this measures, tests/server/analysis/test_verdict_corpus.py asserts).

    .venv/bin/python benchmarks/verdict_corpus.py [--seed 1] [--no-reruns] [--postgres] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the corpus lives with the tests

import psycopg  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from cpci.server.devpg import find_binaries, throwaway_postgres  # noqa: E402
from tests.server.verdict_corpus import CorpusSpec, build_corpus  # noqa: E402
from tests.server.verdict_play import corpus_service, play  # noqa: E402
from tests.server.verdict_score import score  # noqa: E402


@contextmanager
def database(postgres: bool, tmp: Path) -> Iterator[str]:
    """An empty database: a SQLite file, or a fresh database on a throwaway PostgreSQL server."""
    if not postgres:
        yield f"sqlite:///{tmp / 'corpus.db'}"
        return
    bindir = find_binaries()
    if bindir is None:
        raise SystemExit("--postgres: no PostgreSQL binaries (initdb, pg_ctl) found on PATH")
    with throwaway_postgres(bindir) as admin:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE cpci_corpus")
        yield make_url(admin).set(database="cpci_corpus").render_as_string(hide_password=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=200)
    parser.add_argument("--main-runs", type=int, default=40)
    parser.add_argument("--prs", type=int, default=40)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--reruns",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="rerun a failing config up to 2 times in the same upload (the runner's CI default)",
    )
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL instead of SQLite")
    parser.add_argument("--json", action="store_true", help="print the score as JSON")
    parser.add_argument(
        "--misses", type=int, default=5, metavar="N", help="show up to N wrong verdicts per figure"
    )
    args = parser.parse_args()
    spec = CorpusSpec(
        configs=args.configs,
        main_runs=args.main_runs,
        prs=args.prs,
        shards=args.shards,
        seed=args.seed,
        reruns=args.reruns,
    )
    corpus = build_corpus(spec)
    with (
        tempfile.TemporaryDirectory() as tmp,
        database(args.postgres, Path(tmp)) as url,
        corpus_service(url, Path(tmp) / "serve.log") as access,
    ):
        start = time.perf_counter()
        observed = play(corpus, access)
        wall = time.perf_counter() - start
    result = score(corpus, observed)
    if args.json:
        figures = [{**asdict(f), "share": f.value.share} for f in result.figures()]
        misses = [asdict(m) for m in result.misses]
        body = {"spec": asdict(spec), "requests": observed.requests, "wall_s": round(wall, 2)}
        print(json.dumps({**body, "figures": figures, "misses": misses}, indent=2))
        return 0
    engine = "PostgreSQL" if args.postgres else "SQLite"
    reruns = "on" if spec.reruns else "off"
    print(
        f"seed {spec.seed}: {spec.configs} configs, {spec.main_runs} main runs, {spec.prs} PRs, "
        f"{spec.shards} shards, reruns {reruns}, {engine}"
    )
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"{observed.requests} requests ({corpus.uploads} uploads, "
        f"{observed.bytes_sent / 1e6:.1f} MB sent) in {wall:.1f} s; load average {load}"
    )
    for figure in result.figures():
        mark = {True: "ok  ", False: "MISS", None: "    "}[figure.met]
        print(f"{mark} {figure.name}: {figure.value}   goal {figure.goal}")
    if result.hidden_as:
        print(f"     hidden regressions were called: {result.hidden_as}")
    shown: Counter[str] = Counter()
    for miss in result.misses:
        shown[miss.figure] += 1
        if shown[miss.figure] <= args.misses:
            print(f"     miss [{miss.figure}] {miss}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
