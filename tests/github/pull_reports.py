"""Builders of `PullRequestReport`s, so each comment test states only what matters to it."""

from __future__ import annotations

from typing import Any

from cpci.schema import (
    BaselineInfo,
    ConfigVerdict,
    FlakinessAssessment,
    PullRequestReport,
    ReportCounts,
    RunLink,
    ShardProgress,
    Shift,
    ShiftFinding,
)

REPO = "acme/attn"
HEAD = "b" * 40
BASE = "a" * 40


def verdict(name: str, kind: str = "new_failure", **fields: Any) -> ConfigVerdict:
    key = f"tests/test_cp.py::test_attn[{name}]@2"
    values: dict[str, Any] = {
        "config": key,
        "config_pk": len(name),
        "history_url": f"/api/v1/repos/{REPO}/history?config={name}",
        "verdict": kind,
        "reason": "passes at base, fails at head",
        "head_outcome": "failed",
        "base_outcome": "passed",
        "message": "AssertionError: max abs error 0.31 > 0.01",
        "ranks": [1],
    }
    values.update(fields)
    return ConfigVerdict(**values)


def flaky_evidence(**fields: Any) -> FlakinessAssessment:
    """A flaky config's assessment (8 failures in 20 runs), with `fields` replaced."""
    run = RunLink(
        ci_run_id="991",
        ci_attempt=1,
        commit="c" * 40,
        url="https://github.com/acme/attn/actions/runs/991/attempts/1",
    )
    values: dict[str, Any] = {
        "flaky": True,
        "reason": "flip rate 0.40 over 20 runs; its 95% lower bound 0.21 is at least "
        "the threshold 0.10",
        "runs": 20,
        "passes": 12,
        "failures": 8,
        "flips": 8,
        "flip_rate": 0.4,
        "lower_bound": 0.21,
        "effective_runs": 18.0,
        "same_commit": [],
        "failing_runs": [run],
    }
    values.update(fields)
    return FlakinessAssessment(**values)


def report(
    *, configs: int = 412, results: int = 1236, pending: bool = False, **sections: Any
) -> PullRequestReport:
    shards = ShardProgress(
        reported=6 if pending else 8, expected=8, missing=[6, 7] if pending else []
    )
    return PullRequestReport(
        repository=REPO,
        pull_request=42,
        head_commit=HEAD,
        status="pending" if pending else "complete",
        summary="summary text",
        head_runs=[],
        shards=shards,
        baseline=BaselineInfo(
            requested_commit=BASE,
            used_commit=BASE,
            commits_behind=0,
            run=None,
            note=f"base {BASE[:12]}",
        ),
        counts=ReportCounts(configs=configs, results=results, by_verdict={}),
        **sections,
    )


def drift(name: str) -> ShiftFinding:
    shift = Shift(
        name="max_abs_err",
        value=0.02,
        baseline_median=0.01,
        baseline_mad=0.0,
        samples=1,
        change=0.01,
        relative=1.0,
        direction="up",
    )
    return ShiftFinding(
        config=f"tests/test_cp.py::test_attn[{name}]@2",
        config_pk=1,
        history_url=f"/api/v1/repos/{REPO}/history?config={name}",
        shift=shift,
    )
