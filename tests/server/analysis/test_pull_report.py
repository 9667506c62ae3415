"""The PR report's pure builder (`analysis.pull_report`) on hand-built `ReportInputs`: no
database, no HTTP. Sections are capped with their totals kept and paged in report order; each
CI matrix leg is judged against the base's same leg; a report with shards missing decides
nothing; a storm of one infra signature makes its configs INFRA, a storm of another signature
does not."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from cpci.evidence import EvidencePolicy
from cpci.schema import PullRequestReport, ShardProgress
from cpci.server.analysis.flakiness import FlakinessPolicy
from cpci.server.analysis.pull_report import (
    ConfigLeg,
    ReportInputs,
    ReportPolicy,
    build_report,
    build_section,
)
from cpci.server.analysis.storms import StormPolicy
from cpci.server.analysis.verdicts import ResultView
from tests.builders import BASE, HEAD, REPO, baseline

PASSED = [ResultView("passed", 1.0)]
REGRESSION = "AssertionError: out differs from the single-GPU reference"
WATCHDOG = "RuntimeError: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(...)"
COMPLETE = ShardProgress(reported=1, expected=1, missing=[])


def failed(
    message: str = REGRESSION, attempts: int = 1, outcome: str = "failed"
) -> list[ResultView]:
    """A config that failed `attempts` times in a row (its first run and reruns), on rank 0."""
    return [
        ResultView(outcome, messages=(message,), ranks=(0,), attempt=n, culprit=message)
        for n in range(1, attempts + 1)
    ]


def timed_out(attempts: int = 2) -> list[ResultView]:
    """A config whose collective hung in NCCL's watchdog on each of `attempts` attempts."""
    return failed(WATCHDOG, attempts, outcome="timeout")


def key(pk: int) -> str:
    return f"tests/test_cp.py::test_attn[c{pk:03d}]@2"


def inputs(
    head: Mapping[ConfigLeg, Sequence[ResultView]],
    base: Mapping[ConfigLeg, Sequence[ResultView]] | None,
    *,
    shards: ShardProgress = COMPLETE,
    shard_of: Mapping[ConfigLeg, int] | None = None,
) -> ReportInputs:
    """PR 7's inputs: `head` and `base` results by config and leg, no histories (no config
    known flaky), every config on shard 0 unless `shard_of` says otherwise."""
    return ReportInputs(
        repository=REPO,
        pull_request=7,
        head_commit=HEAD,
        head_runs=[],
        shards=shards,
        baseline=baseline(f"base {BASE[:12]} on main"),
        configs={at.pk: key(at.pk) for at in head},
        head=head,
        base=base,
        histories={},
        base_samples={},
        history_url=lambda k: f"/ui/{REPO}/configs?config={k}",
        shard_of=dict.fromkeys(head, 0) if shard_of is None else shard_of,
    )


def policy(cap: int = 200, storms: StormPolicy | None = None) -> ReportPolicy:
    return ReportPolicy(
        flakiness=FlakinessPolicy(),
        evidence=EvidencePolicy(),
        storms=storms or StormPolicy(share=0.8, min_configs=20),
        section_cap=cap,
    )


def configs_of(items: Sequence[object]) -> list[str]:
    return [item.config for item in items]  # type: ignore[attr-defined]


#: Seven configs this PR broke (pks 1-7) among nine, the base passing all of them.
SEVEN_BROKEN = {ConfigLeg(pk): failed() if pk <= 7 else PASSED for pk in range(1, 10)}
BASE_PASSES = dict.fromkeys(SEVEN_BROKEN, PASSED)


def test_a_section_holds_the_cap_and_keeps_its_total() -> None:
    report = build_report(inputs(SEVEN_BROKEN, BASE_PASSES), policy(cap=3))
    assert configs_of(report.new_failures) == [key(1), key(2), key(3)]
    assert report.section_cap == 3
    assert report.section_totals["new_failures"] == report.total("new_failures") == 7
    assert report.section_totals["fixed"] == 0
    assert report.counts.by_verdict == {"new_failure": 7, "passed": 2}
    assert (report.counts.configs, report.counts.results) == (9, 9)
    assert report.status == "complete"
    assert report.summary.startswith("7 new failure")
    assert "9 configs (9 results)" in report.summary


def test_the_pages_of_a_section_list_each_item_once_in_the_reports_order() -> None:
    data, judge = inputs(SEVEN_BROKEN, BASE_PASSES), policy(cap=3)
    report = build_report(data, judge)
    pages, offset = [], 0
    while True:
        page = build_section(data, judge, "new_failures", offset, 3)
        assert (page.total, page.offset, page.limit) == (7, offset, 3)
        pages.append(page)
        if page.next_offset is None:
            break
        offset = page.next_offset
    assert [p.offset for p in pages] == [0, 3, 6]
    assert [len(p.verdicts) for p in pages] == [3, 3, 1]
    assert [v.config for p in pages for v in p.verdicts] == [key(pk) for pk in range(1, 8)]
    assert pages[0].verdicts == report.new_failures  # the report holds the first page
    past = build_section(data, judge, "new_failures", 7, 3)
    assert (past.verdicts, past.next_offset) == ([], None)


def test_each_leg_is_judged_against_the_base_on_the_same_leg() -> None:
    """Config 1 fails on A100 only, where the base passed it: one new failure, on that leg.
    Config 2 fails on both legs and the base ran without a matrix, failing it: that result
    stands for every leg, so it is broken at base on each."""
    head = {
        ConfigLeg(1, "h100"): PASSED,
        ConfigLeg(1, "a100"): failed(),
        ConfigLeg(2, "h100"): failed(),
        ConfigLeg(2, "a100"): failed(),
    }
    base = {
        ConfigLeg(1, "h100"): PASSED,
        ConfigLeg(1, "a100"): PASSED,
        ConfigLeg(2, ""): failed(),
    }
    report = build_report(inputs(head, base), policy())
    assert [(v.config, v.leg) for v in report.new_failures] == [(key(1), "a100")]
    assert [(v.config, v.leg) for v in report.broken_at_base] == [
        (key(2), "a100"),
        (key(2), "h100"),
    ]
    assert (report.counts.configs, report.counts.results) == (2, 4)
    # One leg alone: the verdicts name none.
    single = build_report(inputs({ConfigLeg(1, "h100"): failed()}, base), policy())
    assert [(v.config, v.leg) for v in single.new_failures] == [(key(1), "")]


def test_a_report_with_shards_missing_decides_nothing() -> None:
    """Pending: every config waits, the failing ones too, and a storm-sized failure is no storm
    yet; no timings are compared."""
    head = {ConfigLeg(pk): timed_out() for pk in range(1, 31)}
    missing = ShardProgress(reported=1, expected=2, missing=[1])
    report = build_report(inputs(head, None, shards=missing), policy())
    assert report.status == "pending"
    assert report.counts.by_verdict == {"pending": 30}
    assert report.section_totals["pending"] == 30
    assert report.new_failures == report.infra == []
    assert report.storms == []
    assert report.duration_regressions == report.metric_drift == []
    assert report.summary.startswith("pending: 1/2 shards reported; no verdict until every shard")


@pytest.mark.parametrize(("min_configs", "storm"), [(20, True), (26, False)])
def test_a_storm_of_an_infra_signature_makes_its_configs_infra(
    min_configs: int, storm: bool
) -> None:
    """25 of a shard's 25 configs time out in NCCL's watchdog on both attempts, where the base
    passed them: repeated, so each alone is a new failure (an infra signature once is INFRA);
    a storm (at least `min_configs` configs, 80% of the shard) names the one cause, and they
    are INFRA."""
    head = {ConfigLeg(pk): timed_out() for pk in range(1, 26)}
    report = build_report(
        inputs(head, dict.fromkeys(head, PASSED)),
        policy(storms=StormPolicy(share=0.8, min_configs=min_configs)),
    )
    if not storm:
        assert (report.storms, report.total("new_failures"), report.total("infra")) == ([], 25, 0)
        return
    (found,) = report.storms
    assert (found.shard, found.leg, found.configs, found.of) == (0, "", 25, 25)
    assert found.infra_rule == "nccl-watchdog"
    assert report.counts.by_verdict == {"infra": 25}
    assert report.infra[0].infra_rule == "nccl-watchdog"
    assert report.infra[0].reason.startswith("infra storm on shard 0: 25 of 25 configs")
    assert "storm on 1 shard(s)" in report.summary


def test_a_storm_of_another_signature_keeps_its_verdicts() -> None:
    """A PR that breaks every config of a shard one way is a storm with no infra rule: the
    storm is named, and the configs stay new failures (the gate still fails)."""
    head = {ConfigLeg(pk): failed(REGRESSION) for pk in range(1, 26)}
    report = build_report(inputs(head, dict.fromkeys(head, PASSED)), policy())
    (found,) = report.storms
    assert (found.configs, found.infra_rule) == (25, None)
    assert report.counts.by_verdict == {"new_failure": 25}


def test_storms_are_found_per_shard() -> None:
    """The same 25 failures over two shards, 13 and 12: at a minimum of 13 configs, only shard
    1's are a storm (and INFRA); shard 0's stay new failures."""
    head = {ConfigLeg(pk): timed_out() for pk in range(1, 26)}
    places = {at: at.pk % 2 for at in head}
    report: PullRequestReport = build_report(
        inputs(head, dict.fromkeys(head, PASSED), shard_of=places),
        policy(storms=StormPolicy(share=0.8, min_configs=13)),
    )
    assert [(s.shard, s.configs) for s in report.storms] == [(1, 13)]
    assert report.counts.by_verdict == {"infra": 13, "new_failure": 12}
