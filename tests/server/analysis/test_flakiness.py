"""Flakiness from hand-built histories: direct evidence, minimum samples, decay, the bound."""

from __future__ import annotations

import pytest

from cpci.schema import RunLink
from cpci.server.analysis.flakiness import FlakinessPolicy, assess_flakiness, wilson_lower_bound
from cpci.server.analysis.observations import Observation


def history(
    pattern: str, *, commits: str | None = None, env: int = 1, pr: bool = False, start: int = 0
) -> list[Observation]:
    """One observation per letter: P passed, F failed, S skipped, R failed-then-passed rerun,
    N never ran.
    Each is its own run on its own commit unless `commits` gives one letter per observation."""
    outcomes = {"P": "passed", "F": "failed", "S": "skipped", "R": "passed", "N": "not_run"}
    out = []
    for i, letter in enumerate(pattern):
        commit = commits[i] * 40 if commits else f"{start + i:040x}"
        run = RunLink(ci_run_id=str(start + i), ci_attempt=1, commit=commit, url=f"u/{i}")
        out.append(
            Observation(
                run=run,
                run_id=start + i,
                environment_id=env,
                outcome=outcomes[letter],
                flaky=letter == "R",
                on_pull_request=pr,
            )
        )
    return out


def test_wilson_lower_bound_matches_the_textbook_values() -> None:
    assert wilson_lower_bound(0.5, 10) == pytest.approx(0.2366, abs=1e-4)
    assert wilson_lower_bound(0.2, 10) == pytest.approx(0.0567, abs=1e-4)
    assert wilson_lower_bound(0.0, 100) == 0.0
    assert wilson_lower_bound(0.3, 0) == 0.0


def test_same_commit_pass_and_fail_is_flaky_even_with_few_runs() -> None:
    result = assess_flakiness(history("PF", commits="aa"))
    assert result.flaky
    assert "same commit" in result.reason
    [evidence] = result.same_commit
    assert (evidence.commit, evidence.passes, evidence.failures) == ("a" * 40, 1, 1)
    assert [r.ci_run_id for r in evidence.runs] == ["0", "1"]


def test_rerun_that_passed_is_same_commit_evidence() -> None:
    result = assess_flakiness(history("PR"))
    assert result.flaky
    assert result.same_commit[0].failures == 1


def test_same_commit_in_different_environments_is_not_evidence() -> None:
    mixed = history("P", commits="a", env=1) + history("F", commits="a", env=2, start=1)
    result = assess_flakiness(mixed)
    assert not result.flaky
    assert result.same_commit == []


def test_alternating_history_below_the_minimum_sample_is_not_flaky() -> None:
    result = assess_flakiness(history("PFPFPFPFP"))
    assert not result.flaky
    assert "below the minimum of 10" in result.reason


def test_alternating_history_over_the_minimum_is_flaky_with_evidence() -> None:
    result = assess_flakiness(history("PFPPFPPFPPFPFP"))
    assert result.flaky, result.reason
    assert result.lower_bound >= 0.1
    assert result.flips == 10
    assert [r.ci_run_id for r in result.failing_runs][:2] == ["12", "10"]  # newest first


def test_broken_then_fixed_is_not_flaky() -> None:
    result = assess_flakiness(history("PPPPPPFFFFFFPPPPPP"))
    assert not result.flaky
    assert result.flips == 2
    assert "one unbroken stretch of 6" in result.reason


def test_still_broken_is_not_flaky() -> None:
    assert not assess_flakiness(history("PPPPPPPPPPPPFFF")).flaky


def test_a_single_failure_between_passes_is_flaky() -> None:
    # A rate-0.1 flake fails exactly once in 20 runs about a quarter of the time: the label
    # must catch it (the PR verdict's chance test keeps regressions from hiding behind it).
    result = assess_flakiness(history("PPPPPPPPPFPPPPPPPPPP"))
    assert result.flaky
    assert result.episodes == 1
    assert "failed in 1 of 20 branch runs" in result.reason


def test_no_failure_is_never_flaky() -> None:
    result = assess_flakiness(history("P" * 30))
    assert not result.flaky
    assert result.reason == "no failure in 30 branch run(s)"


def test_recent_flips_rank_above_old_ones() -> None:
    policy = FlakinessPolicy(half_life=5)
    old = assess_flakiness(history("PFPFPFP" + "P" * 19), policy)
    recent = assess_flakiness(history("P" * 19 + "PFPFPFP"), policy)
    assert old.flips == recent.flips
    assert recent.flip_rate > 3 * old.flip_rate
    assert recent.lower_bound > old.lower_bound
    assert recent.flaky  # both failed in separate stretches
    assert old.flaky


def test_a_config_that_never_ran_did_not_fail() -> None:
    result = assess_flakiness(history("PPPPPPPPPPPP") + history("N", start=12))
    assert not result.flaky
    assert result.record.failures == 0


def test_the_failure_record_counts_attempts_and_signatures() -> None:
    # One run with two failing attempts and a passing third (a rerun flake), then 10 passes.
    run = RunLink(ci_run_id="r", ci_attempt=1, commit="c" * 40, url="u")
    rerun = [
        Observation(run=run, run_id=99, environment_id=1, outcome="failed", signature="E: N"),
        Observation(run=run, run_id=99, environment_id=1, outcome="failed", signature="E: N"),
        Observation(run=run, run_id=99, environment_id=1, outcome="passed", flaky=True),
    ]
    result = assess_flakiness(rerun + history("P" * 10, start=100))
    assert (result.record.failures, result.record.trials) == (2, 13)
    assert result.record.signatures == {"E: N": 2}
    assert result.record.novel_share == pytest.approx(1 / 3)


def test_pull_request_runs_do_not_count_towards_flips_or_the_minimum() -> None:
    result = assess_flakiness(history("PFPFPFPFPFPF", pr=True))
    assert not result.flaky
    assert result.runs == 0


def test_skips_are_ignored() -> None:
    assert assess_flakiness(history("PSPSPSPSPSPSPSPSPSPSPS")).flips == 0
