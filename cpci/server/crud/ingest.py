"""Store one shard's upload: all of it in one transaction, or nothing.

Idempotent by design: the shard's identity is (repository, CI run id, attempt, matrix leg, shard
index) and
its body is remembered by hash, so a retried upload stores nothing twice and a *different* body
for the same shard is refused with the conflict named.

A CI run id belongs to the scope that wrote it (`run_scope`: branch, or a pull request's): a PR
upload may never add attempts or shards to a branch run's id (403), and a branch run's upload
always lands, beside a PR run that took its id first, never refused for it (readers then show
the branch run, `crud.runs.merge_runs`). So a PR credential can neither squat main's run id nor
put its results under main's provenance. Rows go in with driver-level bulk
statements (COPY on PostgreSQL, executemany on SQLite), not one ORM object per result, and the
configs are looked up in one query: a shard can hold thousands of results.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, select

from cpci.schema import RunEnvelope, UploadStatus
from cpci.server.core.errors import Conflict, Forbidden
from cpci.server.core.provenance import Provenance, run_scope
from cpci.server.core.quotas import UploadRate, check_upload_rate
from cpci.server.crud.common import (
    bulk_insert,
    fetch_rows,
    insert_missing,
    json_text,
    one_of_texts,
)
from cpci.server.crud.quotas import nth_latest_upload
from cpci.server.crud.repos import bind_github_id, ensure_environment, ensure_repository
from cpci.server.models import (
    Config,
    EnvironmentFingerprint,
    MetricName,
    Result,
    ResultDetail,
    Run,
    Shard,
    utcnow,
)
from cpci.server.packed import ISOLATION_CODE, OUTCOME_CODE, pack_batch, pack_metrics

RESULT_COLUMNS = (
    "id",
    "duration_s",
    "shard_id",
    "config_id",
    "run_id",
    "attempt",
    "outcome",
    "isolation",
    "flaky",
    "arrival",
    "metrics",
    "batch",
)
DETAIL_COLUMNS = ("result_id", "rank_errors", "rerun_reason", "stop_reason", "order_dependence")
CONFIG_COLUMNS = ("repository_id", "key", "nodeid", "world_size", "params")

#: Run fields every shard of a run must agree on.
RUN_FIELDS = ("commit", "branch", "pull_request", "base_commit", "base_branch", "shard_total")


@dataclass(frozen=True)
class Ingested:
    status: UploadStatus
    run_id: int
    shard_id: int
    results: int


def body_sha256(envelope: RunEnvelope) -> str:
    """A hash of the upload's validated content, blind to the body's key order and whitespace,
    and to fields left at their defaults: an optional field added to the schema later leaves the
    hash of an upload that does not set it as it was, so a resend across an upgrade is a
    duplicate, not a conflict."""
    body = envelope.model_dump_json(by_alias=True, exclude_defaults=True)
    return hashlib.sha256(body.encode()).hexdigest()


#: Envelope fields added since shards were hashed with every field (`_sha256_with_every_field`).
_ADDED_SINCE_FULL_HASH = ("base_branch", "merge_commit")


def _sha256_with_every_field(envelope: RunEnvelope) -> str:
    """The hash shards were stored under before `body_sha256` left defaults out: every field of
    the schema they were sent with (so, those added since left out when unset)."""
    unset = {name for name in _ADDED_SINCE_FULL_HASH if getattr(envelope, name) is None}
    body = envelope.model_dump_json(by_alias=True, exclude=unset)
    return hashlib.sha256(body.encode()).hexdigest()


def ingest_shard(
    *,
    session: Session,
    envelope: RunEnvelope,
    digest: str,
    provenance: Provenance,
    rate: UploadRate | None = None,
) -> Ingested:
    """Store the shard (the caller commits). Raises Conflict, writing nothing, on a mismatch.

    `provenance` has passed the claim rules; the run records its first uploader's. A new shard
    counts against the repository's hourly `rate` (QuotaExceeded when it is spent); a
    duplicate stores nothing, so a retry is never refused for the quota."""
    repo_id = ensure_repository(session=session, name=envelope.repository)
    bind_github_id(session=session, repo_id=repo_id, claimed=provenance.repository_github_id)
    run = _ensure_run(session=session, repo_id=repo_id, envelope=envelope, provenance=provenance)
    assert run.id is not None
    existing = session.exec(
        select(Shard).where(
            Shard.run_id == run.id,
            Shard.leg == envelope.leg,
            Shard.shard_index == envelope.shard_index,
        )
    ).first()
    if existing is not None:
        assert existing.id is not None
        if existing.body_sha256 not in (digest, _sha256_with_every_field(envelope)):
            raise _shard_conflict(
                session=session, envelope=envelope, stored=existing, digest=digest
            )
        return Ingested("duplicate", run.id, existing.id, existing.result_count)
    if rate is not None:
        oldest = nth_latest_upload(
            session=session, repo_id=repo_id, n=rate.per_hour, since=rate.since
        )
        check_upload_rate(repository=envelope.repository, rate=rate, oldest=oldest)
    env_id = ensure_environment(session=session, environment=envelope.environment)
    shard = Shard(
        run_id=run.id,
        leg=envelope.leg,
        shard_index=envelope.shard_index,
        body_sha256=digest,
        environment_id=env_id,
        runner_name=envelope.runner_name,
        runner_labels=list(envelope.runner_labels) or None,
        plan_sha256=envelope.plan_hash,
        started_at=envelope.started_at,
        ended_at=envelope.ended_at,
        result_count=len(envelope.results),
    )
    session.add(shard)
    session.flush()
    assert shard.id is not None
    keys = [r.config_key for r in envelope.results]
    config_pks = _ensure_configs(session=session, repo_id=repo_id, envelope=envelope, keys=keys)
    run_id, shard_id = run.id, shard.id  # plain ints: ORM attributes cost per access
    results = envelope.results
    names = _metric_ids(session, {name for r in results for name in r.metrics})
    ids = _result_ids(session, len(results))
    metrics = pack_metrics([r.metrics for r in results], names)
    rows = [
        (
            pk,
            r.duration_s,
            shard_id,
            config_pks[key],
            run_id,
            r.attempt,
            OUTCOME_CODE[r.outcome],
            ISOLATION_CODE[r.isolation],
            r.flaky,
            r.arrival,
            packed,
            pack_batch(r.batch.model_dump()) if r.batch is not None else b"",
        )
        for pk, key, r, packed in zip(ids, keys, results, metrics, strict=True)
    ]
    details = [
        (
            pk,
            json_text(r.rank_errors),
            r.rerun_reason,
            r.stop_reason,
            json_text(r.order_dependence),
        )
        for pk, r in zip(ids, results, strict=True)
        if r.rank_errors or r.rerun_reason or r.stop_reason or r.order_dependence
    ]
    bulk_insert(session=session, model=Result, columns=RESULT_COLUMNS, rows=rows)
    bulk_insert(session=session, model=ResultDetail, columns=DETAIL_COLUMNS, rows=details)
    return Ingested("stored", run_id, shard_id, len(rows))


def _on_leg(leg: str) -> str:
    return f" on leg {leg!r}" if leg else ""


def _shard_conflict(
    *, session: Session, envelope: RunEnvelope, stored: Shard, digest: str
) -> Conflict:
    """Why a different body for a stored shard is refused, and what to do: from another
    environment it is a matrix job that needs a leg of its own (a leg the service made up from
    the environment would go by arrival order: the first environment keeps the unnamed leg,
    so one environment's shards could land on two legs); from the same one, a rerun."""
    shard = (
        f"shard {envelope.shard_index}{_on_leg(envelope.leg)} of run {envelope.ci_run_id} "
        f"attempt {envelope.ci_attempt}"
    )
    then = session.get_one(EnvironmentFingerprint, stored.environment_id)
    changed = [
        f"{name} {getattr(then, name)!r}, now {value!r}"
        for name, value in envelope.environment.model_dump().items()
        if getattr(then, name) != value
    ]
    if changed and not envelope.leg:
        return Conflict(
            f"{shard} was already uploaded from another environment ({'; '.join(changed)}), "
            "and neither upload names a matrix leg: when a matrix runs the same shards in "
            "several environments, give each job its leg (`cpci upload --leg` / CPCI_LEG, the "
            "Action's `leg` input: a name, or the job's runner labels) and declare them all "
            "with --legs / CPCI_LEGS; nothing of this upload was stored"
        )
    if changed:
        return Conflict(
            f"{shard} was already uploaded from another environment ({'; '.join(changed)}): "
            f"two matrix jobs share the leg name {envelope.leg!r}; give each its own leg "
            "(`cpci upload --leg` / CPCI_LEG, the Action's `leg` input); nothing of this "
            "upload was stored"
        )
    return Conflict(
        f"{shard} was already uploaded with different content from the same environment "
        f"(stored sha256 {stored.body_sha256[:12]}, this body {digest[:12]}): a rerun must "
        "upload under a new ci_attempt (GitHub's re-run does), and two matrix jobs running "
        "the same shard each need their own leg (--leg); nothing of this upload was stored"
    )


def _ensure_run(
    *, session: Session, repo_id: int, envelope: RunEnvelope, provenance: Provenance
) -> Run:
    values: dict[str, Any] = {f: getattr(envelope, f) for f in RUN_FIELDS}
    values["legs"] = sorted(set(envelope.legs)) or None
    scope = run_scope(envelope.pull_request)
    if scope == "pr":
        _refuse_adding_to_a_branch_run(session=session, repo_id=repo_id, envelope=envelope)
    insert_missing(
        session=session,
        model=Run,
        rows=[
            {
                "repository_id": repo_id,
                "ci_run_id": envelope.ci_run_id,
                "ci_attempt": envelope.ci_attempt,
                "scope": scope,
                "created_at": utcnow(),
                "upload_via": provenance.via,
                "uploaded_by": provenance.uploaded_by[:500],
                "upload_event": provenance.event and provenance.event[:50],
                "upload_ref": provenance.ref and provenance.ref[:255],
                "upload_workflow": provenance.workflow and provenance.workflow[:500],
                "fork": provenance.fork,
                **values,
            }
        ],
        keys=["repository_id", "ci_run_id", "ci_attempt", "scope"],
    )
    run: Run = session.exec(
        select(Run).where(
            Run.repository_id == repo_id,
            Run.ci_run_id == envelope.ci_run_id,
            Run.ci_attempt == envelope.ci_attempt,
            Run.scope == scope,
        )
    ).one()
    clashes = [
        f"{f}: stored {getattr(run, f)!r}, sent {v!r}"
        for f, v in values.items()
        if getattr(run, f) != v
    ]
    if clashes:
        raise Conflict(
            f"run {envelope.ci_run_id} attempt {envelope.ci_attempt} of {envelope.repository} "
            f"was recorded with other values ({'; '.join(clashes)}): every shard of a run must "
            "carry the same run fields"
        )
    return run


def _refuse_adding_to_a_branch_run(
    *, session: Session, repo_id: int, envelope: RunEnvelope
) -> None:
    """Forbidden when a branch run holds the CI run id this pull request's upload names."""
    branch_run = session.exec(
        select(Run).where(
            Run.repository_id == repo_id,
            Run.ci_run_id == envelope.ci_run_id,
            Run.scope == "branch",
        )
    ).first()
    if branch_run is None:
        return
    raise Forbidden(
        f"run {envelope.ci_run_id} of {envelope.repository} is a branch run (branch "
        f"{branch_run.branch!r} at {branch_run.commit[:12]}, uploaded by "
        f"{branch_run.uploaded_by}): an upload of pull request #{envelope.pull_request} may not "
        "add attempts or shards to it, so it is refused; upload the PR's run under its own CI "
        "run id (GITHUB_RUN_ID of its pull_request workflow, which `cpci upload` takes unless "
        "--ci-run-id says otherwise)"
    )


def _ensure_configs(
    *, session: Session, repo_id: int, envelope: RunEnvelope, keys: Sequence[str]
) -> dict[str, int]:
    """Config row ids by key (`keys[i]` is result i's), creating the configs not seen before."""
    ids = _config_pks(session, repo_id, dict.fromkeys(keys))
    missing: dict[str, tuple[Any, ...]] = {}
    for key, r in zip(keys, envelope.results, strict=True):
        if key not in ids and key not in missing:
            missing[key] = (repo_id, key, r.nodeid, r.world_size, json_text(r.params))
    if missing:
        bulk_insert(
            session=session,
            model=Config,
            columns=CONFIG_COLUMNS,
            rows=list(missing.values()),
            on_conflict_ignore=["repository_id", "key"],
        )
        ids.update(_config_pks(session, repo_id, missing))
    return ids


def _config_pks(session: Session, repo_id: int, keys: Iterable[str]) -> dict[str, int]:
    """One query however many keys (a chunked IN list costs a statement per few hundred)."""
    member, values = one_of_texts(session, keys)
    rows = fetch_rows(
        session,
        f"SELECT key, id FROM config WHERE repository_id = ? AND key{member}",
        repo_id,
        values,
    )
    return dict(rows)


def _result_ids(session: Session, n: int) -> list[int]:
    """Ids for `n` new results, so that their detail rows can name them before either is
    written: PostgreSQL's sequence hands them out (concurrent uploads take other ones); on
    SQLite this upload holds the write lock (its shard is written), so the next ids are free."""
    if n == 0:
        return []
    if session.get_bind().dialect.name == "postgresql":
        rows = fetch_rows(session, "SELECT nextval('result_id_seq') FROM generate_series(1, ?)", n)
        return [pk for (pk,) in rows]
    ((top,),) = fetch_rows(session, "SELECT COALESCE(MAX(id), 0) FROM result")
    return list(range(top + 1, top + 1 + n))


def _metric_ids(session: Session, names: set[str]) -> dict[str, int]:
    """The metric_name ids of `names`, creating the names not seen before."""
    if not names:
        return {}
    insert_missing(
        session=session, model=MetricName, rows=[{"name": n} for n in sorted(names)], keys=["name"]
    )
    member, values = one_of_texts(session, names)
    return dict(fetch_rows(session, f"SELECT name, id FROM metric_name WHERE name{member}", values))
