"""The evidence summary the runner fetches before a run (`cpci.schema.EvidenceSummary`).

From the trusted branch's runs only: a branch that is not trusted is refused, naming the
setting, so a runner never decides reruns by evidence no PR is judged by (it falls back to fixed
reruns, saying why). Every config of the branch's newest CI runs has an entry, and so has every
quarantined config; the summary is bounded (`MAX_EVIDENCE_CONFIGS`, in key order).
"""

from __future__ import annotations

from sqlmodel import Session

from cpci.schema import (
    MAX_EVIDENCE_CONFIGS,
    ConfigEvidence,
    EvidenceSummary,
    FlakeRecord,
    QuarantineState,
)
from cpci.server.core.errors import Forbidden
from cpci.server.core.policies import PullReportPolicy
from cpci.server.crud.evidence import branch_evidence
from cpci.server.crud.quarantine import open_quarantines
from cpci.server.models import Quarantine, Repository, as_utc
from cpci.urls import Links


def trusted_branch(repo: Repository, branch: str | None, policy: PullReportPolicy) -> str:
    """`branch`, or the default trusted branch; Forbidden, naming the rule, when untrusted."""
    trust = policy.trusted
    chosen = branch or trust.default_branch(repo.default_branch)
    if not trust.trusts(chosen, repo.default_branch):
        raise Forbidden(
            f"branch {chosen} is not a trusted branch ({trust.describe()}): evidence comes from "
            "trusted branches only, as only their runs judge pull requests; ask for the PR's "
            "base branch, or trust this one"
        )
    return chosen


def quarantine_state(held: Quarantine) -> QuarantineState:
    return QuarantineState(since=as_utc(held.added_at), by=held.added_by, reason=held.reason)


def evidence_summary(
    *,
    session: Session,
    repo: Repository,
    branch: str | None,
    policy: PullReportPolicy,
    links: Links,
) -> EvidenceSummary:
    """Each config's record, label, runs and quarantine on the trusted `branch`."""
    assert repo.id is not None
    chosen = trusted_branch(repo, branch, policy)
    found = branch_evidence(
        session=session,
        repo_id=repo.id,
        repo_name=repo.name,
        branch=chosen,
        window=policy.lookback.window,
        policy=policy.flakiness,
        links=links,
    )
    held = open_quarantines(session=session, repo_id=repo.id)
    configs: dict[str, ConfigEvidence] = {}
    for key in sorted(found.configs.keys() | held.keys()):
        seen = found.configs.get(key)
        configs[key] = ConfigEvidence(
            record=seen.record if seen else FlakeRecord(failures=0, trials=0),
            flaky=seen.flaky if seen else False,
            runs=seen.runs if seen else 0,
            quarantine=quarantine_state(held[key]) if key in held else None,
        )
    evidence = policy.judge.evidence
    return EvidenceSummary(
        repository=repo.name,
        branch=chosen,
        runs=found.ci_runs,
        newest_commit=found.newest_commit,
        threshold=evidence.threshold,
        level=evidence.level,
        configs=dict(list(configs.items())[:MAX_EVIDENCE_CONFIGS]),
        truncated=len(configs) > MAX_EVIDENCE_CONFIGS,
    )
