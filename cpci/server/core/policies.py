"""The analysis' policies, read from the settings once for every reader (the flaky list, the
dashboard, the PR report)."""

from __future__ import annotations

from cpci.server.analysis.evidence import EvidencePolicy
from cpci.server.analysis.flakiness import FlakinessPolicy
from cpci.server.core.config import Settings
from cpci.server.core.trusted_branches import TrustedBranches


def flakiness_policy(settings: Settings) -> FlakinessPolicy:
    """The flaky label's settings."""
    return FlakinessPolicy(
        min_runs=settings.flaky_min_runs,
        half_life=settings.flaky_half_life,
    )


def evidence_policy(settings: Settings) -> EvidencePolicy:
    """The regression-or-flake chance test's settings."""
    return EvidencePolicy(
        threshold=settings.flake_chance_threshold, level=settings.flake_credible_level
    )


def trusted_branches(settings: Settings) -> TrustedBranches:
    """Which branches' runs judge pull requests."""
    return TrustedBranches(settings.trusted_branches)
