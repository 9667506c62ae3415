"""Is a config flaky, and on what evidence?

Dr. CI's most common complaint is real failures called flaky on weak evidence, so the label here
needs either *direct* evidence (the same commit in the same environment both passed and failed)
or a long enough history whose flip rate is high even at its 95% lower confidence bound. Flips
are weighted by recency (exponential decay), and only branch runs count towards the flip rate:
a pull request's red-then-green history is mostly work in progress, not flakiness.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from cpci.server.analysis.observations import Observation, RunLink

MAX_LINKS = 10


@dataclass(frozen=True)
class FlakinessPolicy:
    min_runs: int = 10
    threshold: float = 0.1
    half_life: float = 20.0
    z: float = 1.96


class SameCommitEvidence(BaseModel):
    """One commit and environment on which the config both passed and failed."""

    commit: str
    environment_id: int
    passes: int
    failures: int
    runs: list[RunLink]


class FlakinessAssessment(BaseModel):
    flaky: bool
    reason: str
    runs: int
    passes: int
    failures: int
    flips: int
    flip_rate: float
    lower_bound: float
    effective_runs: float
    same_commit: list[SameCommitEvidence]
    failing_runs: list[RunLink]


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
    """Assess one config from its history (oldest first)."""
    counted = [o for o in observations if o.counted]
    same_commit = _same_commit_evidence(counted)
    series = [o for o in counted if not o.on_pull_request]
    flips, rate, n_eff = _decayed_flip_rate(series, policy.half_life)
    lower = wilson_lower_bound(rate, n_eff, policy.z)
    runs = len({o.run_id for o in series})
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
    elif runs < policy.min_runs:
        flaky = False
        reason = (
            f"only {runs} branch run(s), below the minimum of {policy.min_runs}, "
            "and no same-commit pass and failure"
        )
    else:
        flaky = lower >= policy.threshold
        verb = "at least" if flaky else "below"
        reason = (
            f"flip rate {rate:.2f} over {runs} runs; its 95% lower bound {lower:.2f} is "
            f"{verb} the threshold {policy.threshold:.2f}"
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
    )


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
