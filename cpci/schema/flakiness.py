"""A config's flakiness as the PR report and the flaky list carry it.

`FlakeRecord` is the history counted per attempt, `FlakeTest` the regression-or-flake numbers a
verdict's reason quotes, `FlakinessAssessment` the label and the evidence behind it (same-commit
passes and failures, the failing runs). The service computes them (`cpci.server.analysis`); the
GitHub side only reads them, so they live here and not there.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from cpci.schema.runs import RunLink


class FlakeRecord(BaseModel):
    """What trusted history says about a config's failures: counted per attempt."""

    failures: int
    trials: int
    signatures: dict[str, int] = {}  # normalised first error line -> failures showing it

    @property
    def novel_share(self) -> float:
        """Good-Turing: the chance that the next flaky failure shows a never-seen signature."""
        seen = sum(self.signatures.values())
        once = sum(1 for n in self.signatures.values() if n == 1)
        return (once + 1) / (seen + 1)


class FlakeTest(BaseModel):
    """The numbers behind a regression-or-flake call, shown in its reason."""

    failed_attempts: int
    history_failures: int
    history_trials: int
    rate_upper: float
    level: float
    novel_signature: bool
    novel_share: float
    chance: float
    threshold: float

    @property
    def flake_explains(self) -> bool:
        return self.chance >= self.threshold

    def text(self) -> str:
        """E.g. "failed 3/3 attempts; known flaky rate <= 0.18; chance 0.6% < 20% (...)"."""
        k = self.failed_attempts
        out = (
            f"failed {k}/{k} attempt{'s' if k != 1 else ''}; known flaky rate <= "
            f"{self.rate_upper:.2f}; chance {self.chance:.1%} "
            f"{'>=' if self.flake_explains else '<'} {self.threshold:.0%} "
            f"({self.history_failures}/{self.history_trials} attempts failed on branch runs"
        )
        if self.novel_signature:
            out += f"; a new error signature, as {self.novel_share:.0%} of its flaky failures show"
        return out + ")"


class SameCommitEvidence(BaseModel):
    """One commit and environment on which the config both passed and failed."""

    commit: str
    environment_id: int
    passes: int
    failures: int
    runs: list[RunLink]


class FlakinessAssessment(BaseModel):
    """Is a config flaky, why (`reason`), and the counts and runs that say so."""

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
    episodes: int = Field(default=0, description="separate stretches of failing branch runs")
    record: FlakeRecord = Field(
        default_factory=lambda: FlakeRecord(failures=0, trials=0),
        description="failures per attempt on branch runs, and their signatures",
    )
