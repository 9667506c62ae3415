"""A config's outcome from its phase reports, and the agreement of its ranks."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from cpci.runner.wire.agreement import agreed_record, local_outcome, merge
from cpci.runner.wire.protocol import LocalOutcome, RankPayload
from cpci.runner.wire.rank_errors import rank_error
from tests.runner.helpers import results


@dataclass
class Report:
    when: str
    outcome: str
    wasxfail: str | None = None

    @property
    def failed(self) -> bool:
        return self.outcome == "failed"

    @property
    def skipped(self) -> bool:
        return self.outcome == "skipped"

    def __getattribute__(self, name: str) -> object:
        if name == "wasxfail" and object.__getattribute__(self, "wasxfail") is None:
            raise AttributeError(name)  # pytest sets wasxfail only on xfail reports
        return object.__getattribute__(self, name)


def phases(
    setup: str, call: str | None, teardown: str = "passed", xfail: bool = False
) -> list[Report]:
    reports = [Report("setup", setup)]
    if call is not None:
        reports.append(Report("call", call, "reason" if xfail else None))
    reports.append(Report("teardown", teardown))
    return reports


@pytest.mark.parametrize(
    ("reports", "expected"),
    [
        (phases("passed", "passed"), "passed"),
        (phases("passed", "failed"), "failed"),
        (phases("failed", None), "error"),
        (phases("passed", "passed", teardown="failed"), "error"),
        (phases("skipped", None), "skipped"),
        (phases("passed", "skipped"), "skipped"),
        (phases("passed", "skipped", xfail=True), "xfailed"),
        (phases("passed", "passed", xfail=True), "xpassed"),
    ],
)
def test_local_outcome(reports: list[Report], expected: str) -> None:
    assert local_outcome(reports) == expected


@pytest.mark.parametrize(
    ("ranks", "agreed"),
    [
        (["passed", "passed"], "passed"),
        (["passed", "failed"], "failed"),  # one failing rank fails the config
        (["failed", "error"], "error"),
        (["skipped", "passed"], "passed"),
        (["xfailed", "xfailed"], "xfailed"),
    ],
)
def test_merge_takes_the_most_severe(ranks: list[LocalOutcome], agreed: str) -> None:
    assert merge(ranks) == agreed


def _payload(rank: int, outcome: LocalOutcome, **metrics: float) -> RankPayload:
    failed = outcome in ("failed", "error")
    return RankPayload(
        rank=rank,
        outcome=outcome,
        reports=[{"rank": rank}],
        errors=[rank_error(rank, "call", f"E   boom on {rank}")] if failed else [],
        metrics=metrics,
    )


def test_the_agreed_record_shows_the_first_rank_with_the_agreed_outcome() -> None:
    ranks = [_payload(0, "passed", err=1.0), _payload(1, "failed", err=3.0), _payload(2, "failed")]
    record = agreed_record(7, ranks, duration_s=0.5)
    assert (record.index, record.outcome, record.duration_s) == (7, "failed", 0.5)
    assert (record.report_rank, record.reports) == (1, [{"rank": 1}])
    assert [(e.rank, e.message) for e in record.rank_errors] == [(1, "boom on 1"), (2, "boom on 2")]
    assert record.metrics == {"err": 3.0}  # the max over the ranks that reported it
    assert record.metrics_partial == [2]  # rank 2 failed without recording it


def test_metrics_are_whole_when_every_failing_rank_recorded_them() -> None:
    ranks = [_payload(0, "failed", err=1.0), _payload(1, "passed")]  # rank 1 records nothing
    assert agreed_record(0, ranks, duration_s=0).metrics_partial == []


PARTIAL = """
import pytest

@pytest.mark.cpci(world_size=2)
def test_rank_1_fails_before_recording(cpci_dist):
    assert cpci_dist.rank == 0, "rank 1 diverged"
    cpci_dist.record_metric("max_abs_err", 0.0)
"""


def test_a_metric_rank_1_never_recorded_is_marked_partial(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_partial=PARTIAL)
    result = pytester.runpytest_subprocess("--cpci-results=r.jsonl")
    result.assert_outcomes(failed=1)
    (record,) = results(pytester.path / "r.jsonl")
    assert (record["metrics"], record["metrics_partial"]) == ({"max_abs_err": 0.0}, [1])
    result.stdout.fnmatch_lines(
        [
            "outcome failed on rank 1 (world size 2), *",
            "metrics partial: rank 1 failed before recording them; max_abs_err=0 is the max over "
            "the other ranks only",
        ]
    )


def test_rank_zero_is_shown_when_it_has_the_agreed_outcome() -> None:
    record = agreed_record(0, [_payload(0, "passed"), _payload(1, "passed")], duration_s=0)
    assert (record.outcome, record.report_rank) == ("passed", 0)


def test_payloads_out_of_rank_order_are_an_invariant_broken() -> None:
    with pytest.raises(AssertionError, match="rank order"):
        agreed_record(0, [_payload(1, "passed"), _payload(0, "failed")], duration_s=0)
