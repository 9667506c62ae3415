"""What the settings mean to the service's readers and writers, built once when the app is.

`ServicePolicies.from_settings` turns the flat `Settings` into the typed policies each part
uses: how a PR report judges and how far back it looks, which branches' runs count, what an
upload may hold, when report read models are primed, and who may read. `create_app` keeps the
one object on `app.state.policies`; routes take a part of it through `api.deps` and hand it
down, so no crud or view function takes `Settings` (or rebuilds a policy per call).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cpci.evidence import EvidencePolicy
from cpci.server.analysis.flakiness import FlakinessPolicy
from cpci.server.analysis.pull_report import ReportPolicy
from cpci.server.analysis.storms import StormPolicy
from cpci.server.core.config import Settings
from cpci.server.core.provenance import OidcAllowList
from cpci.server.core.trusted_branches import TrustedBranches


@dataclass(frozen=True)
class Lookback:
    """How much history a reader weighs: `window` results per config (flakiness), the
    `baseline_runs` newest base-branch runs a PR's timings are compared with, and the
    `ancestor_depth` first-parent ancestors searched for a baseline."""

    window: int
    baseline_runs: int
    ancestor_depth: int


@dataclass(frozen=True)
class PullReportPolicy:
    """Everything a PR report is built by: how it judges (`judge`: flakiness, evidence,
    storms, the section cap), whose runs are evidence (`trusted`) and how far back it looks
    (`lookback`). The dashboard, the flaky list and the bot read by the same one."""

    judge: ReportPolicy
    trusted: TrustedBranches
    lookback: Lookback

    @property
    def flakiness(self) -> FlakinessPolicy:
        return self.judge.flakiness


@dataclass(frozen=True)
class UploadPolicy:
    """What one upload may be: at most `max_results` results, at most `per_hour` stored shards
    per repository in any hour (0: no limit), `fork_workflows` the workflows whose OIDC uploads
    may stand for a fork's PR; `warm`: read the PR's report into the cache once an upload
    completes its run."""

    max_results: int
    per_hour: int
    fork_workflows: tuple[str, ...]
    warm: bool


@dataclass(frozen=True)
class PrimingPolicy:
    """Start-up priming of the recently active PRs' report read models: at most `seconds`
    spent, `pulls` PRs, those with a run in the last `days` (`seconds` or `pulls` 0: off)."""

    seconds: float
    pulls: int
    days: float

    @property
    def enabled(self) -> bool:
        return self.seconds > 0 and self.pulls > 0


@dataclass(frozen=True)
class AccessPolicy:
    """Who may read (`reads`: anyone, or a token of the repository) and whose OIDC tokens are
    accepted (`oidc`)."""

    reads: Literal["public", "token"]
    oidc: OidcAllowList


@dataclass(frozen=True)
class QuarantinePolicy:
    """When a quarantine ends: the trusted branch's results since it began bound the config's
    failure rate below `release_rate` at the credible `level` (`cpci.evidence.release`)."""

    release_rate: float
    level: float


@dataclass(frozen=True)
class ServicePolicies:
    """The service's policies, one object per app (`app.state.policies`), built from the
    settings (their one source of defaults)."""

    pull_report: PullReportPolicy
    uploads: UploadPolicy
    priming: PrimingPolicy
    access: AccessPolicy
    quarantine: QuarantinePolicy

    @classmethod
    def from_settings(cls, settings: Settings) -> ServicePolicies:
        judge = ReportPolicy(
            flakiness=FlakinessPolicy(
                min_runs=settings.flaky_min_runs, half_life=settings.flaky_half_life
            ),
            evidence=EvidencePolicy(
                threshold=settings.flake_chance_threshold, level=settings.flake_credible_level
            ),
            storms=StormPolicy(share=settings.storm_share, min_configs=settings.storm_min_configs),
            section_cap=settings.report_section_cap,
        )
        return cls(
            pull_report=PullReportPolicy(
                judge=judge,
                trusted=TrustedBranches(settings.trusted_branches),
                lookback=Lookback(
                    window=settings.flaky_window,
                    baseline_runs=settings.baseline_runs,
                    ancestor_depth=settings.ancestor_depth,
                ),
            ),
            uploads=UploadPolicy(
                max_results=settings.max_results_per_upload,
                per_hour=settings.max_uploads_per_hour,
                fork_workflows=settings.oidc_fork_workflows,
                warm=settings.warm_pull_reports,
            ),
            priming=PrimingPolicy(
                seconds=settings.warm_on_start_s,
                pulls=settings.warm_on_start_pulls,
                days=settings.warm_on_start_days,
            ),
            access=AccessPolicy(
                reads=settings.read_access,
                oidc=OidcAllowList(
                    names=settings.oidc_allowed_repositories,
                    ids=settings.oidc_allowed_repository_ids,
                ),
            ),
            quarantine=QuarantinePolicy(
                release_rate=settings.quarantine_release_rate,
                level=settings.flake_credible_level,
            ),
        )
