"""Is a config flaky, and on what evidence?

The label is liberal, because it no longer decides a PR's verdict alone: a failure at head is
weighed against the config's failure rate by `cpci.evidence.chance`, which protects real
regressions. A config is flaky on *direct* evidence (the same commit in the same environment
both passed and failed) or when its branch history, at least `min_runs` runs, shows failures
that came and went: in several separate stretches, or a single failing run between passes. A
single unbroken stretch of failures is a breakage that was fixed (or is still there), not
flakiness. A config that never failed is never flaky: no label on no evidence. Only trusted
evidence reaches this module (branch runs, and a PR's own runs for its own report: the loader
filters), and only branch runs count towards the runs, the stretches and the failure rate: a
pull request's red-then-green history is mostly work in progress. The recency-weighted flip
rate and its Wilson lower bound rank the list and are shown as evidence.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from cpci.evidence import tally_signatures
from cpci.schema import FlakeRecord, FlakinessAssessment, RunLink, SameCommitEvidence
from cpci.server.analysis.observations import Observation

MAX_LINKS = 10


@dataclass(frozen=True)
class FlakinessPolicy:
    min_runs: int = 10
    half_life: float = 20.0
    z: float = 1.96


def wilson_lower_bound(p: float, n: float, z: float = 1.96) -> float:
    """The lower end of the Wilson score interval for a proportion `p` seen over `n` trials."""
    if n <= 0:
        return 0.0
    denominator = 1 + z * z / n
    centre = p + z * z / (2 * n)
    margin = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - margin) / denominator)


def assess_flakiness(
    observations: Sequence[Observation], policy: FlakinessPolicy = FlakinessPolicy()
) -> FlakinessAssessment:
    """Assess one config from its trusted history (oldest first)."""
    counted = [o for o in observations if o.counted]
    same_commit = _same_commit_evidence(counted)
    series = [o for o in counted if not o.on_pull_request]
    flips, rate, n_eff = _decayed_flip_rate(series, policy.half_life)
    lower = wilson_lower_bound(rate, n_eff, policy.z)
    per_run = _per_run(series)
    runs = len(per_run)
    stretches = _stretches(per_run)
    failed_runs = sum(per_run)
    passes = sum(o.passed for o in counted)
    failures = sum(o.failed or o.flaky for o in counted)
    if same_commit:
        e = same_commit[0]
        flaky = True
        reason = (
            f"passed and failed on the same commit {e.commit[:12]} and environment "
            f"({e.passes} pass(es), {e.failures} failure(s))"
        )
        if len(same_commit) > 1:
            reason += f", and so on {len(same_commit) - 1} more commit(s)"
    elif not failed_runs:
        flaky = False
        reason = f"no failure in {runs} branch run(s)"
    elif runs < policy.min_runs:
        flaky = False
        reason = (
            f"only {runs} branch run(s), below the minimum of {policy.min_runs}, "
            "and no same-commit pass and failure"
        )
    elif len(stretches) == 1 and stretches[0] > 1:
        flaky = False
        reason = (
            f"failed in one unbroken stretch of {stretches[0]} of {runs} branch runs: "
            "a breakage, not flakiness"
        )
    else:
        flaky = True
        reason = (
            f"failed in {failed_runs} of {runs} branch runs, in {len(stretches)} separate "
            f"stretch(es) that passed again"
        )
    failing = [o.run for o in reversed(counted) if o.failed or o.flaky]
    return FlakinessAssessment(
        flaky=flaky,
        reason=reason,
        runs=runs,
        passes=passes,
        failures=failures,
        flips=flips,
        flip_rate=round(rate, 4),
        lower_bound=round(lower, 4),
        effective_runs=round(n_eff, 2),
        same_commit=same_commit,
        failing_runs=_unique(failing)[:MAX_LINKS],
        episodes=len(stretches),
        record=flake_record(series),
    )


@dataclass(frozen=True)
class BaseEvidence:
    """What the base branch's own history says of a config that failed at the base: the base
    run ends a streak of `streak` base-branch CI runs in a row that it failed (a rerun that
    passed is no failure), with `failed_attempts` failing attempts among them and these error
    `signatures`; `known` is its flakiness before the streak (None: no history before it)."""

    known: FlakinessAssessment | None
    streak: int
    failed_attempts: int
    signatures: tuple[str, ...]


def base_evidence(
    history: Sequence[Observation], base_runs: Collection[int], policy: FlakinessPolicy
) -> BaseEvidence | None:
    """`history` (a config's trusted observations, oldest first) read up to the base run
    (`base_runs`: the stored run ids of its attempts): the base's failures are weighed against
    what came before them, as the head's are against what came before the head. None when the
    base run is not in the history (pushed out of its window by later runs)."""
    last = max(base_runs)
    branch = [o for o in history if not o.on_pull_request and o.run_id <= last]
    if not any(o.run_id in base_runs for o in branch):
        return None
    by_run: dict[str, list[Observation]] = defaultdict(list)  # per CI run, in order
    for o in branch:
        if o.counted or o.flaky:
            by_run[o.run.ci_run_id].append(o)
    streak: list[Observation] = []
    for group in reversed(list(by_run.values())):
        if not all(o.failed and not o.flaky for o in group):
            break
        streak += group
    if not streak:
        return None
    first = min(o.run_id for o in streak)
    before = [o for o in branch if o.run_id < first]
    runs = len({o.run.ci_run_id for o in streak})
    return BaseEvidence(
        known=assess_flakiness(before, policy) if before else None,
        streak=runs,
        failed_attempts=len(streak),
        signatures=tuple(o.signature for o in streak if o.signature),
    )


def flake_record(series: Sequence[Observation]) -> FlakeRecord:
    """Failures per attempt: a run's failing results each count, and a rerun that passed
    (`flaky`) counts the failure it hides when the run kept no failing result of it."""
    failures = trials = 0
    by_run: dict[int, list[Observation]] = defaultdict(list)
    for o in series:
        by_run[o.run_id].append(o)
    for group in by_run.values():
        failed = sum(o.failed for o in group)
        if not failed and any(o.flaky for o in group):
            failed = 1
        failures += failed
        trials += failed + sum(o.passed for o in group)
    signatures = tally_signatures(o.signature for o in series if o.failed and o.signature)
    return FlakeRecord(failures=failures, trials=trials, signatures=signatures)


def _per_run(series: Sequence[Observation]) -> list[bool]:
    """One entry per branch run, in order: did the config fail (or need a rerun) in it?"""
    failed: dict[int, bool] = {}
    for o in series:
        failed[o.run_id] = failed.get(o.run_id, False) or o.failed or o.flaky
    return list(failed.values())


def _stretches(per_run: Sequence[bool]) -> list[int]:
    """The lengths of the maximal stretches of consecutive failing runs."""
    out: list[int] = []
    length = 0
    for failed in [*per_run, False]:
        if failed:
            length += 1
        elif length:
            out.append(length)
            length = 0
    return out


def _same_commit_evidence(counted: Sequence[Observation]) -> list[SameCommitEvidence]:
    groups: dict[tuple[str, int], list[Observation]] = defaultdict(list)
    for o in counted:
        groups[(o.run.commit, o.environment_id)].append(o)
    evidence = []
    for (commit, env), group in groups.items():
        passes = sum(o.passed for o in group)
        failures = sum(o.failed for o in group)
        rerun_flakes = sum(o.flaky for o in group)  # failed, then passed on a rerun
        if (passes and failures) or rerun_flakes:
            evidence.append(
                SameCommitEvidence(
                    commit=commit,
                    environment_id=env,
                    passes=passes,
                    failures=failures + rerun_flakes,
                    runs=_unique([o.run for o in group])[:MAX_LINKS],
                )
            )
    return sorted(evidence, key=lambda e: -(e.passes + e.failures))


def _decayed_flip_rate(series: Sequence[Observation], half_life: float) -> tuple[int, float, float]:
    """Flips between consecutive results, newest weighted 1, halving every `half_life` results.

    Returns the flip count, the weighted flip rate and the effective sample size (Kish), which is
    what the confidence bound is taken over.
    """
    pairs = list(itertools.pairwise(series))
    if not pairs:
        return 0, 0.0, 0.0
    weights = [0.5 ** ((len(pairs) - 1 - i) / half_life) for i in range(len(pairs))]
    flipped = [a.failed != b.failed for a, b in pairs]
    total = sum(weights)
    rate = sum(w for w, f in zip(weights, flipped, strict=True) if f) / total
    n_eff = total * total / sum(w * w for w in weights)
    return sum(flipped), rate, n_eff


def _unique(links: Sequence[RunLink]) -> list[RunLink]:
    seen: dict[tuple[str, int], RunLink] = {}
    for link in links:
        seen.setdefault((link.ci_run_id, link.ci_attempt), link)
    return list(seen.values())
