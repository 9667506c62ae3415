"""Whether a PR passes: one decision shared by the check run and the comment's headline.

`fail-on` is the gating mode: `new-failures` (the default) fails only on failures this PR
introduced; `any-failure` also on failures it inherited (broken at base, flaky, infra, no
baseline); `never` reports without gating. A `severity: fail` consistency rule that is broken and
not acknowledged fails under every mode but `never`.
"""

from __future__ import annotations

from typing import Literal, get_args

from cpci.github.consistency import ConsistencyResult
from cpci.schema import GATING, VERDICTS, PullRequestReport
from cpci.schema.verdicts import count_text

FailOn = Literal["new-failures", "any-failure", "never"]
FAIL_ON: tuple[FailOn, ...] = get_args(FailOn)
#: What the gate says: pending until every shard is in; neutral = failures, but not gated.
Gate = Literal["pending", "success", "failure", "neutral"]


def failing_configs(report: PullRequestReport) -> int:
    """Configs failing at head for any reason (fixed configs pass): the verdict table says
    which verdicts those are."""
    return sum(report.total(v.field) for v in VERDICTS if v.failing and v.field)


def gating_configs(report: PullRequestReport) -> int:
    """Configs whose failure this PR is to blame for (what `new-failures` gates on)."""
    return sum(report.total(v.field) for v in VERDICTS if v.gates and v.field)


def gating_text(report: PullRequestReport) -> str:
    """ "2 new failure(s), 1 flaky on arrival": what `new-failures` gates on, counted in full
    (a capped section's total), in the verdict table's order; "" when nothing gates."""
    totals: dict[str, int] = {
        v.name: report.total(v.field) for v in VERDICTS if v.gates and v.field
    }
    return count_text(totals, GATING)


def gate(
    report: PullRequestReport | None,
    consistency: ConsistencyResult | None,
    fail_on: FailOn = "new-failures",
) -> Gate:
    """The verdict the check run concludes with."""
    if fail_on not in FAIL_ON:
        raise ValueError(f"fail-on must be one of {', '.join(FAIL_ON)}, got {fail_on!r}")
    broken_rule = consistency is not None and consistency.failed
    if fail_on != "never" and broken_rule:
        return "failure"
    if report is None or report.status == "pending":
        return "pending"
    failing = failing_configs(report)
    if fail_on == "new-failures" and gating_configs(report):
        return "failure"
    if fail_on == "any-failure" and failing:
        return "failure"
    return "neutral" if failing or broken_rule else "success"


def is_red(value: Gate) -> bool:
    return value == "failure"
