"""Reading a repository's results: history, runs, flaky configs, PR reports; and recording
commit ancestry so a PR without a tested base can fall back to an ancestor."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from sqlmodel import select

from cpci.schema import (
    Ancestry,
    AncestryReceipt,
    ConfigDurations,
    EvidenceSummary,
    PullRequestReport,
    ReportSectionPage,
)
from cpci.server.api.deps import (
    CredentialDep,
    LinksDep,
    PullReportPolicyDep,
    ReadableRepoDep,
    SessionDep,
)
from cpci.server.api.view_deps import PullReportView, PullSectionView
from cpci.server.core.errors import Forbidden
from cpci.server.core.provenance import check_ancestry
from cpci.server.crud.commits import record_parents
from cpci.server.crud.repos import bind_github_id, ensure_repository
from cpci.server.models import Repository
from cpci.server.views.durations import DEFAULT_RUNS, MAX_RUNS, config_durations
from cpci.server.views.evidence import evidence_summary
from cpci.server.views.flaky import flaky_configs
from cpci.server.views.history import config_history
from cpci.server.views.read_models import FlakyList, HistoryPage, RunSummary
from cpci.server.views.run import run_summary

router = APIRouter(prefix="/repos/{owner}/{repo}", tags=["results"])


@router.get("/history", summary="One config's results, newest first, paged")
def history(
    repository: ReadableRepoDep,
    session: SessionDep,
    links: LinksDep,
    config: Annotated[str, Query(min_length=1, description="config id: NODEID@WORLD_SIZE")],
    before: Annotated[int | None, Query(ge=1, description="next_cursor of the last page")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> HistoryPage:
    return config_history(
        session=session, repo=repository, key=config, before=before, limit=limit, links=links
    )


@router.get("/runs/{ci_run_id}", summary="A CI run: shards reported, outcomes, failing configs")
def run(
    repository: ReadableRepoDep, session: SessionDep, links: LinksDep, ci_run_id: str
) -> RunSummary:
    return run_summary(session=session, repo=repository, ci_run_id=ci_run_id, links=links)


@router.get("/flaky", summary="Configs labelled flaky, each with its evidence")
def flaky(
    repository: ReadableRepoDep,
    session: SessionDep,
    policy: PullReportPolicyDep,
    links: LinksDep,
    runs: Annotated[int, Query(ge=1, le=1000, description="recent runs to look for failures")] = 50,
    branch: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=255,
            pattern=r"^[^\x00]*$",
            description="the branch whose runs are read (default: the default trusted branch)",
        ),
    ] = None,
) -> FlakyList:
    return flaky_configs(
        session=session,
        repo=repository,
        branch=branch,
        window_runs=runs,
        policy=policy,
        links=links,
    )


@router.get(
    "/durations",
    summary="Median seconds per config over recent trusted branch runs, to balance shards by",
    description="Every shard of a CI run that plans from this answer computes the same plan "
    "(`--cpci-durations URL`, or the Action's durations file). Passing results only, of branch "
    "runs (never a PR's); `branch` defaults to the default trusted branch (while it has runs).",
)
def durations(
    repository: ReadableRepoDep,
    session: SessionDep,
    policy: PullReportPolicyDep,
    branch: Annotated[
        str | None, Query(min_length=1, max_length=255, pattern=r"^[^\x00]*$")
    ] = None,
    runs: Annotated[
        int, Query(ge=1, le=MAX_RUNS, description="newest CI runs of the branch to read")
    ] = DEFAULT_RUNS,
) -> ConfigDurations:
    return config_durations(
        session=session, repo=repository, branch=branch, runs=runs, trusted=policy.trusted
    )


@router.get(
    "/evidence",
    summary="Each config's base-branch evidence, for the runner's rerun decisions",
    description="One request per run (`cpci.evidence/1`): per config key its failures per "
    "attempt and signatures over the trusted branch's newest runs (`CPCI_FLAKY_WINDOW`), its "
    "flaky label, the branch runs it ran in (none: no entry, a new config) and its quarantine; "
    "with the threshold and credible level the service judges by. `branch` defaults to the "
    "default trusted branch; an untrusted branch is a 403.",
    responses={403: {"description": "the branch is not trusted (CPCI_TRUSTED_BRANCHES)"}},
)
def evidence(
    repository: ReadableRepoDep,
    session: SessionDep,
    policy: PullReportPolicyDep,
    links: LinksDep,
    branch: Annotated[
        str | None, Query(min_length=1, max_length=255, pattern=r"^[^\x00]*$")
    ] = None,
) -> EvidenceSummary:
    return evidence_summary(
        session=session, repo=repository, branch=branch, policy=policy, links=links
    )


@router.get(
    "/pulls/{number}/report",
    summary="Verdict per config for a pull request: head against base",
)
def pull_request(report: PullReportView) -> PullRequestReport:
    return report


@router.get(
    "/pulls/{number}/report/{section}",
    summary="One page of a PR report's section: the items past the report's cap",
    description="The report holds the first `section_cap` items of each section and each "
    "section's total in `section_totals`; this pages through a whole section in the same "
    "order. `next_offset` is null on the last page.",
)
def pull_request_section(view: PullSectionView) -> ReportSectionPage:
    return view


@router.post(
    "/commits",
    summary="Record first-parent commit links of a trusted branch",
    description="First write wins; a link contradicting a stored one is a 409 naming both "
    "parents (a link stored before trust was checked is replaced). Needs branch rights on a "
    "trusted branch (`CPCI_TRUSTED_BRANCHES`): an OIDC token from a branch run, whose ref names "
    "the branch, or a `branch` token with the body's `branch`; `cpci upload` records the "
    "checkout's first-parent history of branch runs by itself.",
    tags=["uploads"],
    responses={
        403: {"description": "the credential has no branch rights, or the branch is untrusted"},
        409: {"description": "a link contradicts a stored one"},
        413: {"description": "the body is over CPCI_MAX_BODY_BYTES"},
        422: {"description": "the body is not an Ancestry, or nests too deeply"},
    },
)
def commits(
    owner: str,
    repo: str,
    body: Ancestry,
    credential: CredentialDep,
    session: SessionDep,
    policy: PullReportPolicyDep,
) -> AncestryReceipt:
    name = f"{owner}/{repo}"
    credential.require(name)
    branch = check_ancestry(credential, body.branch)
    known = session.exec(select(Repository).where(Repository.name == name)).first()
    trust = policy.trusted
    if not trust.trusts(branch, known.default_branch if known else None):
        raise Forbidden(
            f"branch {branch} is not a trusted branch ({trust.describe()}): commit ancestry is "
            "taken from trusted branches only, as only their runs judge pull requests; nothing "
            "to do unless this branch should be trusted"
        )
    repo_id = ensure_repository(session=session, name=name)
    if credential.claims is not None:
        bind_github_id(session=session, repo_id=repo_id, claimed=credential.claims.repository_id)
    count = record_parents(
        session=session, repo_id=repo_id, links=[(p.commit, p.parent) for p in body.parents]
    )
    session.commit()
    return AncestryReceipt(recorded=count)
