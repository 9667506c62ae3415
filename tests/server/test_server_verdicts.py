"""Verdicts, infra signatures and shifts, from hand-built results (no database)."""

from __future__ import annotations

import statistics

import pytest

from cpci.server.analysis.flakiness import FlakinessAssessment
from cpci.server.analysis.infra import infra_signature
from cpci.server.analysis.shifts import DURATION_POLICY, METRIC_POLICY, median, robust_shift
from cpci.server.analysis.verdicts import ResultView, decide

P, F = ResultView("passed"), ResultView("failed", messages=("AssertionError: 3e-2 > 1e-3",))
SKIP = ResultView("skipped")


def known(flaky: bool) -> FlakinessAssessment:
    return FlakinessAssessment(
        flaky=flaky, reason="r", runs=12, passes=8, failures=4, flips=6, flip_rate=0.5,
        lower_bound=0.3 if flaky else 0.0, effective_runs=11.0, same_commit=[], failing_runs=[],
    )  # fmt: skip


@pytest.mark.parametrize(
    ("head", "base", "flaky", "verdict"),
    [
        ([F], [P], None, "new_failure"),
        ([F], [P], known(False), "new_failure"),
        ([F], [P], known(True), "flaky"),
        ([F], [F], known(True), "flaky"),
        ([F], [F], known(False), "broken_at_base"),
        ([F], [P, F], None, "flaky"),  # the base itself passed and failed
        ([F, P], [P], None, "flaky"),  # the head itself passed and failed
        ([ResultView("passed", flaky=True)], [P], None, "flaky"),
        ([F], None, None, "no_baseline"),
        ([P], [F], None, "fixed"),
        ([P], None, None, "passed"),
        ([SKIP], [F], None, "skipped"),
        (
            [ResultView("timeout", messages=("Watchdog caught collective operation timeout",))],
            [P],
            None,
            "infra",
        ),
        ([ResultView("timeout", messages=("hung in all_to_all",))], [P], None, "new_failure"),
    ],
)
def test_decide(
    head: list[ResultView], base: list[ResultView] | None, flaky: FlakinessAssessment | None,
    verdict: str,
) -> None:  # fmt: skip
    assert decide(head, base, flaky).verdict == verdict


def test_no_baseline_carries_the_note() -> None:
    note = "no results at base aaaa; used ancestor bbbb, 3 commit(s) behind"
    assert decide([F], None, None, note).reason == note


@pytest.mark.parametrize(
    ("outcome", "message", "rule"),
    [
        (
            "crashed",
            "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(...)",
            "nccl-watchdog",
        ),
        (
            "error",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "cuda-oom",
        ),
        ("crashed", "The runner has received a shutdown signal.", "lost-runner"),
        ("crashed", "NCCL error in: ..., unhandled system error", "nccl-system"),
        ("crashed", "GPU 3 has fallen off the bus", "gpu-lost"),
        ("failed", "CUDA out of memory", None),  # a test body's OOM may be the PR's doing
        ("crashed", "Segmentation fault in flash_attn_fwd", None),
    ],
)
def test_infra_signatures(outcome: str, message: str, rule: str | None) -> None:
    found = infra_signature(outcome, [message])
    assert (found.name if found else None) == rule


def test_duration_regression_needs_noise_relative_and_absolute_margins() -> None:
    base = [1.00, 1.02, 0.98, 1.01, 0.99]
    shift = robust_shift("duration_s", base, 1.60, DURATION_POLICY)
    assert shift is not None
    assert shift.direction == "up"
    assert shift.relative == pytest.approx(0.6)
    assert robust_shift("duration_s", base, 1.10, DURATION_POLICY) is None  # within 25%
    assert robust_shift("duration_s", [0.01] * 5, 0.05, DURATION_POLICY) is None  # under 50 ms
    assert robust_shift("duration_s", base, 0.3, DURATION_POLICY) is None  # faster is fine
    assert robust_shift("duration_s", [1.0, 1.0], 9.0, DURATION_POLICY) is None  # too few
    noisy = [1.0, 2.0, 0.5, 1.8, 0.7]
    assert robust_shift("duration_s", noisy, 1.6, DURATION_POLICY) is None  # within the noise


def test_metric_drift_flags_both_directions() -> None:
    grown = robust_shift("max_abs_err", [1e-4, 1.1e-4], 5e-3, METRIC_POLICY)
    assert grown is not None
    assert grown.direction == "up"
    shrunk = robust_shift("tflops", [100.0], 20.0, METRIC_POLICY)
    assert shrunk is not None
    assert shrunk.direction == "down"
    assert robust_shift("max_abs_err", [1e-4], 1.2e-4, METRIC_POLICY) is None


@pytest.mark.parametrize(
    "values", [[2.0], [3.0, 1.0], [5.0, 1.0, 3.0], [4.0, 1.0, 3.0, 2.0], [1.0] * 5]
)
def test_median_is_the_statistics_median(values: list[float]) -> None:
    assert median(values) == statistics.median(values)


def test_median_of_nothing_is_an_error() -> None:
    with pytest.raises(statistics.StatisticsError):
        median([])
