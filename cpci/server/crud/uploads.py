"""Storing one shard's upload: the write transaction and its retry, the receipt, the warm step.

`store_upload` is what `POST /api/v1/uploads` calls once it has read the envelope and checked
who may claim it (`core.provenance`); it raises the service's own errors (`core.errors`), which
the API answers as they are. An upload that completes a run of a trusted branch then weighs the
open quarantines' release (`crud.quarantine.release_by_evidence`).
"""

from __future__ import annotations

import logging

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from cpci import urls
from cpci.schema import RunEnvelope, UploadReceipt
from cpci.server.core.db import writer
from cpci.server.core.errors import Conflict
from cpci.server.core.policies import PullReportPolicy, QuarantinePolicy, UploadPolicy
from cpci.server.core.provenance import Provenance
from cpci.server.core.quotas import UploadRate, check_results_per_upload
from cpci.server.crud.ingest import Ingested, body_sha256, ingest_shard
from cpci.server.crud.pull_report import warm_pull_report
from cpci.server.crud.quarantine import release_by_evidence
from cpci.server.crud.runs import merge_runs
from cpci.server.crud.shard_cache import ShardCache
from cpci.server.models import Repository, Run, utcnow
from cpci.urls import Links

log = logging.getLogger(__name__)

#: Write transactions tried before a shard that keeps colliding with a concurrent upload of the
#: same run is answered 409.
ATTEMPTS = 3


def store_upload(
    *,
    engine: Engine,
    envelope: RunEnvelope,
    provenance: Provenance,
    policy: UploadPolicy,
    report_policy: PullReportPolicy,
    quarantine: QuarantinePolicy,
    links: Links,
    cache: ShardCache,
) -> UploadReceipt:
    """Store one shard whole or not at all, within `policy`'s limits (results per upload,
    uploads per hour); then, where it completed a PR's run, read that PR's report into `cache`
    (`policy.warm`), and where it completed a trusted branch's run, release the quarantines its
    evidence now releases. The receipt says `stored` or `duplicate` and the run's progress."""
    check_results_per_upload(len(envelope.results), policy.max_results)
    rate = UploadRate(per_hour=policy.per_hour, now=utcnow()) if policy.per_hour else None
    receipt = _store(engine, envelope, provenance, rate)
    if receipt.status == "stored" and receipt.shards.complete:
        if envelope.pull_request is None:
            _weigh_quarantines(engine, envelope, report_policy, quarantine, links)
        elif policy.warm:
            _warm(engine, envelope, report_policy, links, cache)
    return receipt


def _store(
    engine: Engine, envelope: RunEnvelope, provenance: Provenance, rate: UploadRate | None
) -> UploadReceipt:
    """Ingest in one write transaction; retry when a concurrent upload created the same rows.
    `rate` is the repository's hourly upload quota (None: no limit)."""
    digest = body_sha256(envelope)
    for attempt in range(ATTEMPTS):
        try:
            with Session(writer(engine)) as session:
                done = ingest_shard(
                    session=session,
                    envelope=envelope,
                    digest=digest,
                    provenance=provenance,
                    rate=rate,
                )
                receipt = _receipt(session, envelope, done)
                session.commit()
                return receipt
        except IntegrityError as exc:
            if attempt == ATTEMPTS - 1:
                raise Conflict(
                    f"shard {envelope.shard_index} of run {envelope.ci_run_id} kept colliding "
                    "with a concurrent upload of the same run: retry"
                ) from exc
    raise AssertionError("not reached")


def _warm(
    engine: Engine,
    envelope: RunEnvelope,
    policy: PullReportPolicy,
    links: Links,
    cache: ShardCache,
) -> None:
    """Build the PR's report read model into the cache once the upload that completed its run
    is committed (a rolled back shard's id could come back for another), before the answer:
    the Action's report job, the bot and reviewers read the report next. Only the last shard of
    a run warms: a head read after each of N shards would cost N reads of a growing head and
    fill the cache with sets nobody reads again (a reader mid-run loads it itself). Branch
    uploads warm nothing: a PR's base is read along with its head. Off with
    CPCI_WARM_PULL_REPORTS=false. The shard is stored whatever happens here, so a failure is
    logged, not answered: the report's first read then loads it itself."""
    assert envelope.pull_request is not None
    try:
        with Session(engine) as session:
            warm_pull_report(
                session=session,
                repository=envelope.repository,
                number=envelope.pull_request,
                commit=envelope.commit,
                policy=policy,
                links=links,
                cache=cache,
            )
    except Exception:  # an optimisation failing must not turn a stored upload into a 500
        log.exception(
            "could not warm the report of %s#%s after an upload; its next read loads it",
            envelope.repository,
            envelope.pull_request,
        )


def _weigh_quarantines(
    engine: Engine,
    envelope: RunEnvelope,
    report_policy: PullReportPolicy,
    policy: QuarantinePolicy,
    links: Links,
) -> None:
    """Release the quarantines the trusted branch's results now release, once the run that
    brought them is committed (an untrusted branch's run releases nothing: it judges no PR).
    The shard is stored whatever happens here: a failure is logged, and the next run weighs
    them again."""
    try:
        with Session(writer(engine)) as session:
            repo = session.exec(
                select(Repository).where(Repository.name == envelope.repository)
            ).one()
            trusted = report_policy.trusted.trusts(envelope.branch, repo.default_branch)
            if repo.id is None or envelope.branch is None or not trusted:
                return
            released = release_by_evidence(
                session=session,
                repo_id=repo.id,
                repo_name=repo.name,
                branch=envelope.branch,
                rate=policy.release_rate,
                level=policy.level,
                links=links,
            )
            session.commit()
    except Exception:  # a release found later is as good: it must not fail a stored upload
        log.exception("could not weigh the quarantines of %s after a run", envelope.repository)
        return
    for done in released:
        # The session is closed: `repo`'s attributes expired with its commit.
        log.info(
            "released the quarantine of %s in %s by its evidence", done.config, envelope.repository
        )


def _receipt(session: Session, envelope: RunEnvelope, done: Ingested) -> UploadReceipt:
    """What was stored: the progress of the run written to (every attempt in its scope)."""
    stored = session.get_one(Run, done.run_id)
    runs = session.exec(
        select(Run).where(
            Run.repository_id == stored.repository_id,
            Run.ci_run_id == envelope.ci_run_id,
            Run.scope == stored.scope,
        )
    ).all()
    merged = merge_runs(session=session, runs=runs)[0]
    return UploadReceipt(
        status=done.status,
        repository=envelope.repository,
        ci_run_id=envelope.ci_run_id,
        ci_attempt=envelope.ci_attempt,
        shard_index=envelope.shard_index,
        leg=envelope.leg,
        results=done.results,
        shards=merged.progress,
        run_api_url=urls.api_run_summary(envelope.repository, envelope.ci_run_id),
        run_url=urls.run(envelope.repository, envelope.ci_run_id),
    )
