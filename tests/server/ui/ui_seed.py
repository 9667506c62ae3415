"""Seeded history for the UI tests: a repository with a flaky config, a config that fails on
one runner only, a config named like an XSS probe, and a pull request with a new failure.

Uploaded through the real API, so the pages read what an upload stores. The expected figures
the tests check against are computed here, next to the data that produces them.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from cpci.schema import ResultRecord, RunEnvelope
from tests.builders import REPO, Client, config, envelope, record, send, sha

XSS = "<script>alert(1)</script>"
NAMES = ("p2p", "a2a", "ring", "all_gather", XSS)
MAIN_RUNS = 12
PR, PR_HEAD = 7, "c" * 40
START = datetime(2025, 1, 1, tzinfo=timezone.utc)
PR_FAILS = ("p2p", XSS)
HTML_MESSAGE = "<b>NCCL</b> watchdog timeout after {s}s on 0x{addr:x} rank {rank}"


def a2a_fails(run: int) -> bool:
    """a2a fails every third main run: flaky by its flip rate."""
    return run % 3 == 1


def ring_shard(run: int) -> int:
    """ring alternates between the runners; it always fails on gpu-b (shard 1)."""
    return run % 2


def _result(name: str, run: int, position: int, failed: bool, message: str | None) -> ResultRecord:
    extra: dict[str, Any] = {
        "duration_s": 1.0 + position * 0.5 + (run % 4) * 0.1,
        "metrics": {"max_abs_err": 10.0 ** -(3 + run % 3)},
        "batch": {"index": position // 2, "world": 0, "size": 2},
    }
    if failed:
        extra["message"] = message or "assert close failed"
    return record(name, "failed" if failed else "passed", **extra)


def main_run(run: int) -> list[RunEnvelope]:
    """The two shard bodies of main run `run` (1-based)."""
    shards: list[list[ResultRecord]] = [[], []]
    for position, name in enumerate(NAMES):
        shard = ring_shard(run) if name == "ring" else position % 2
        failed = (name == "a2a" and a2a_fails(run)) or (name == "ring" and shard == 1)
        message = HTML_MESSAGE.format(s=30 + run, addr=0x7F00 + run, rank=run % 2)
        shards[shard].append(_result(name, run, position, failed, message))
    when = START + timedelta(hours=run)
    return [
        envelope(
            results,
            commit=sha(run),
            ci_run_id=str(1000 + run),
            shard_index=index,
            shard_total=2,
            runner_name=f"gpu-{'ab'[index]}",
            runner_labels=["gpu", "h100"],
            started_at=when.isoformat(),
            ended_at=(when + timedelta(seconds=60)).isoformat(),
        )
        for index, results in enumerate(shards)
    ]


def pull_request() -> list[RunEnvelope]:
    """PR #7 against the last main commit: p2p and the XSS-named config newly fail."""
    results = [
        _result(name, 99, position, name in PR_FAILS, "<i>p2p</i> mismatch at 0x1f")
        for position, name in enumerate(NAMES)
        if name != "ring"
    ]
    return [
        envelope(
            results,
            commit=PR_HEAD,
            branch="feature",
            pull_request=PR,
            base_commit=sha(MAIN_RUNS),
            ci_run_id="2000",
            runner_name="gpu-a",
            started_at=(START + timedelta(hours=MAIN_RUNS + 1)).isoformat(),
        )
    ]


def seed(client: Client) -> None:
    bodies = [body for run in range(1, MAIN_RUNS + 1) for body in main_run(run)]
    for body in [*bodies, *pull_request()]:
        response = send(client, body)
        assert response.status_code == 201, response.text


#: What the pages must show, derived from the rules above.
A2A = config("a2a")
RING = config("ring")
XSS_CONFIG = config(XSS)
A2A_FAILED_COMMITS = sum(a2a_fails(r) for r in range(1, MAIN_RUNS + 1))
RING_FAILED_COMMITS = sum(ring_shard(r) == 1 for r in range(1, MAIN_RUNS + 1))
RUNS_WITH_FAILURES = sum(a2a_fails(r) or ring_shard(r) == 1 for r in range(1, MAIN_RUNS + 1))
LATEST_RUN = str(1000 + MAIN_RUNS)
__all__ = ["REPO"]
