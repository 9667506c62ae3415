"""Database tables and their public views, in the Base / table / Public families.

A run is one CI run attempt of one repository; it arrives as shards, each holding the results of
many configs. Results carry their shard and config ids so the two hot queries (one config's
history, one run's results through its shards) each walk a single index.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    UniqueConstraint,
    text,
)
from sqlmodel import Field, SQLModel

from cpci.schema import ENVIRONMENT_LENGTHS
from cpci.server.packed import IsolationCode, OutcomeCode

#: Named constraints, so migrations can alter them on SQLite (batch mode) and PostgreSQL alike.
SQLModel.metadata.naming_convention = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

#: SQLite only auto-increments an INTEGER PRIMARY KEY; PostgreSQL gets a BIGINT.
_BIG_ID = BigInteger().with_variant(Integer(), "sqlite")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def as_utc(when: datetime) -> datetime:
    """SQLite hands timestamps back without their zone; they were stored in UTC."""
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def _when(**kwargs: Any) -> Any:
    return Field(sa_type=DateTime(timezone=True), **kwargs)


def _json(nullable: bool = True) -> Any:
    return Field(default=None, sa_type=JSON, nullable=nullable)


class RepositoryBase(SQLModel):
    name: str = Field(max_length=200, unique=True, description="OWNER/REPO")


class Repository(RepositoryBase, table=True):
    id: int | None = Field(default=None, primary_key=True)
    github_id: int | None = Field(
        default=None,
        sa_type=BigInteger,
        description="GitHub's numeric repository id, bound by the first OIDC upload: a later "
        "token for the same name with another id (a recreated or renamed repository) is refused",
    )
    default_branch: str | None = Field(
        default=None,
        max_length=255,
        description="the default branch GitHub reports (webhooks, repos/get): trusted unless "
        "CPCI_TRUSTED_BRANCHES says otherwise; unknown: `main`",
    )
    created_at: datetime = _when(default_factory=utcnow)


class RepositoryPublic(RepositoryBase):
    id: int


class UploadTokenBase(SQLModel):
    name: str = Field(default="", max_length=200, description="what the token is for")
    scope: str = Field(
        default="branch",
        max_length=16,
        description="branch: branch history and PR runs; pr: PR runs only (see core/provenance)",
    )


class UploadToken(UploadTokenBase, table=True):
    """Only the SHA-256 of a token is kept: a database leak does not leak upload rights."""

    __tablename__ = "upload_token"
    id: int | None = Field(default=None, primary_key=True)
    repository_id: int = Field(foreign_key="repository.id", index=True)
    token_sha256: str = Field(max_length=64, unique=True)
    created_at: datetime = _when(default_factory=utcnow)
    revoked_at: datetime | None = _when(default=None, nullable=True)


class UploadTokenPublic(UploadTokenBase):
    id: int
    repository: str
    created_at: datetime
    revoked_at: datetime | None


class EnvironmentBase(SQLModel):
    """The stored columns of `cpci.schema.Environment`, each as long as the wire type allows."""

    python: str | None = Field(default=None, max_length=ENVIRONMENT_LENGTHS["python"])
    torch: str | None = Field(default=None, max_length=ENVIRONMENT_LENGTHS["torch"])
    cuda: str | None = Field(default=None, max_length=ENVIRONMENT_LENGTHS["cuda"])
    nccl: str | None = Field(default=None, max_length=ENVIRONMENT_LENGTHS["nccl"])
    gpu: str | None = Field(default=None, max_length=ENVIRONMENT_LENGTHS["gpu"])
    backend: str | None = Field(default=None, max_length=ENVIRONMENT_LENGTHS["backend"])
    platform: str | None = Field(default=None, max_length=ENVIRONMENT_LENGTHS["platform"])


class EnvironmentFingerprint(EnvironmentBase, table=True):
    """One distinct environment; results on the same commit *and* environment are comparable."""

    __tablename__ = "environment"
    id: int | None = Field(default=None, primary_key=True)
    fingerprint: str = Field(max_length=64, unique=True)


class RunBase(SQLModel):
    ci_run_id: str = Field(max_length=100)
    ci_attempt: int = 1
    commit: str = Field(max_length=64)
    branch: str | None = Field(default=None, max_length=255)
    pull_request: int | None = None
    base_commit: str | None = Field(default=None, max_length=64)
    base_branch: str | None = Field(
        default=None, max_length=255, description="the branch a PR run merges into"
    )
    shard_total: int = Field(description="shards expected")


class Run(RunBase, table=True):
    __table_args__ = (
        UniqueConstraint("repository_id", "ci_run_id", "ci_attempt", "scope"),
        Index("ix_run_repo_commit", "repository_id", "commit"),
        Index("ix_run_repo_pull", "repository_id", "pull_request"),
        Index("ix_run_repo_branch", "repository_id", "branch", "id"),
    )
    id: int | None = Field(default=None, primary_key=True)
    repository_id: int = Field(foreign_key="repository.id")
    scope: str = Field(
        default="branch",
        max_length=10,
        description="branch (no pull_request) or pr: the scope a credential needs to write it. "
        "A CI run id belongs to the scope that wrote it: a PR upload may never add to a branch "
        "run's id (403), and a branch run whose id a PR took first is stored beside it, in its "
        "own scope, and is the one readers show",
    )
    created_at: datetime = _when(default_factory=utcnow)
    # Who uploaded the run's first shard (every shard is checked against the same rules).
    upload_via: str | None = Field(default=None, max_length=10, description="token or oidc")
    uploaded_by: str | None = Field(
        default=None, max_length=500, description="token:ID or the OIDC subject claim"
    )
    upload_event: str | None = Field(default=None, max_length=50, description="OIDC event_name")
    upload_ref: str | None = Field(default=None, max_length=255, description="OIDC ref")
    upload_workflow: str | None = Field(
        default=None, max_length=500, description="OIDC job_workflow_ref (or workflow)"
    )
    fork: bool = Field(
        default=False, description="uploaded by the allow-listed fork-results workflow"
    )
    legs: list[str] | None = _json()  # the matrix legs the workflow declared, if it did


class Shard(SQLModel, table=True):
    """One uploaded shard; its body hash makes re-uploads idempotent and conflicts detectable."""

    __table_args__ = (UniqueConstraint("run_id", "leg", "shard_index"),)
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id")
    leg: str = Field(default="", max_length=200, description="matrix leg; '' without a matrix")
    shard_index: int
    body_sha256: str = Field(max_length=64)
    environment_id: int = Field(foreign_key="environment.id")
    runner_name: str | None = Field(default=None, max_length=255)
    runner_labels: list[str] | None = _json()
    started_at: datetime | None = _when(default=None, nullable=True)
    ended_at: datetime | None = _when(default=None, nullable=True)
    result_count: int
    plan_sha256: str | None = Field(
        default=None,
        max_length=64,
        description="hash of the shard's plan inputs; shards of one run and leg that differ "
        "were planned differently (configs may be dropped or run twice)",
    )
    # Indexed for the uploads-per-hour quota, which reads the last hour's shards newest first.
    uploaded_at: datetime = _when(default_factory=utcnow, index=True)


class ConfigBase(SQLModel):
    key: str = Field(max_length=2100, description="stable config id: NODEID@WORLD_SIZE")
    nodeid: str = Field(max_length=2000)
    world_size: int


class Config(ConfigBase, table=True):
    __table_args__ = (UniqueConstraint("repository_id", "key"),)
    id: int | None = Field(default=None, primary_key=True)
    repository_id: int = Field(foreign_key="repository.id")
    params: dict[str, Any] | None = _json()


class ConfigPublic(ConfigBase):
    id: int
    params: dict[str, Any] = {}


class Result(SQLModel, table=True):
    """One attempt of one config in one shard, in the fewest bytes (`cpci.server.packed`): its
    environment is its shard's, its outcome and isolation small codes, its metrics interned
    names with float64 values, its batch four numbers. What most results lack (rank errors,
    rerun and stop reasons, order dependence) is a `ResultDetail` row of its own. Columns are
    ordered widest first and none is NULL, so PostgreSQL pads nothing and keeps no null bitmap.
    The run id stays (a history read filters on the run for each of a hundred configs, and a
    join through the shard there doubled PostgreSQL's time; it fits the row's alignment padding
    there) but is not indexed: a run's results are read through its shards. Two indexes: one
    config's history, newest first, and one shard's results."""

    __table_args__ = (
        Index("ix_result_config_id_id", "config_id", "id"),
        Index("ix_result_shard_id", "shard_id"),
    )
    id: int | None = Field(default=None, sa_column=Column(_BIG_ID, primary_key=True))
    duration_s: float
    shard_id: int = Field(foreign_key="shard.id")
    config_id: int = Field(foreign_key="config.id")
    run_id: int = Field(foreign_key="run.id")
    attempt: int = 1
    outcome: str = Field(sa_type=OutcomeCode)
    isolation: str | None = Field(default=None, sa_type=IsolationCode, nullable=False)
    flaky: bool = False
    arrival: bool = Field(default=False, description="an extra run of a config new to the branch")
    metrics: bytes = Field(
        default=b"", sa_type=LargeBinary, description="(metric_name id, float64) pairs, packed"
    )
    batch: bytes = Field(default=b"", sa_type=LargeBinary, description="BatchInfo, packed")


class ResultDetail(SQLModel, table=True):
    """What a result holds beyond its numbers, only for the results that have any of it: a
    failure's rank errors, a rerun's reasons, what bisection found."""

    __tablename__ = "result_detail"
    result_id: int = Field(
        sa_column=Column(_BIG_ID, ForeignKey("result.id"), primary_key=True, autoincrement=False)
    )
    rank_errors: list[dict[str, Any]] | None = _json()
    rerun_reason: str | None = Field(
        default=None, max_length=2000, description="why this attempt was a rerun (attempts >= 2)"
    )
    stop_reason: str | None = Field(
        default=None, max_length=2000, description="the final attempt: why the reruns stopped"
    )
    order_dependence: dict[str, Any] | None = _json()  # cpci.schema.OrderDependence


class MetricName(SQLModel, table=True):
    """A metric's name, stored once: results refer to it by id (`packed.pack_metrics`)."""

    __tablename__ = "metric_name"
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=200, unique=True)


class Quarantine(SQLModel, table=True):
    """A config a maintainer quarantined: it still runs and is recorded, never gates. At most
    one open quarantine per config (`released_at` null); a released one stays, for its page."""

    __table_args__ = (
        Index(
            "uq_quarantine_open",
            "repository_id",
            "config_key",
            unique=True,
            sqlite_where=text("released_at IS NULL"),
            postgresql_where=text("released_at IS NULL"),
        ),
    )
    id: int | None = Field(default=None, primary_key=True)
    repository_id: int = Field(foreign_key="repository.id")
    config_key: str = Field(max_length=2100, description="NODEID@WORLD_SIZE")
    reason: str = Field(max_length=2000)
    added_by: str = Field(max_length=500, description="the credential that quarantined it")
    added_at: datetime = _when(default_factory=utcnow)
    released_at: datetime | None = _when(default=None, nullable=True)
    released_by: str | None = Field(
        default=None, max_length=500, description="`evidence` or the credential that released it"
    )
    release_note: str | None = Field(default=None, max_length=2000, description="why, in words")


class CommitParent(SQLModel, table=True):
    """First-parent links, so a PR whose base was never tested can fall back to an ancestor."""

    __tablename__ = "commit_parent"
    repository_id: int = Field(foreign_key="repository.id", primary_key=True)
    commit: str = Field(max_length=64, primary_key=True)
    parent: str = Field(max_length=64)
    trusted: bool = Field(
        default=True,
        description="sent for a trusted branch; links recorded before trust was checked are "
        "not, and a trusted branch's conflicting link replaces them",
    )


class WebhookDelivery(SQLModel, table=True):
    """One webhook delivery and its work: stored with its payload before the 202, then done by
    the webhook worker (retried with backoff, resumed after a restart). Only a finished delivery
    (`done`, `ignored`) makes a redelivery of its GUID a duplicate; `digest` (SHA-256 of the
    body) makes a replayed body under a fresh GUID one too."""

    __tablename__ = "github_delivery"
    id: int | None = Field(default=None, primary_key=True)
    delivery_id: str = Field(max_length=100, unique=True)
    event: str = Field(max_length=50)
    action: str | None = Field(default=None, max_length=50)
    status: str = Field(max_length=20, description="queued, running, done, ignored or failed")
    detail: str | None = Field(default=None, max_length=2000)
    received_at: datetime = _when(default_factory=utcnow)
    digest: str | None = Field(default=None, max_length=64, unique=True)
    payload: dict[str, Any] | None = _json()
    attempts: int = Field(default=0)
    next_attempt_at: datetime | None = _when(default=None, index=True)
    lease_until: datetime | None = _when(default=None)


class GitHubPullState(SQLModel, table=True):
    """What the bot last published on a PR: its comment, its check run and the consistency
    findings (so a workflow_run event can re-render without asking GitHub again)."""

    __tablename__ = "github_pull_state"
    __table_args__ = (UniqueConstraint("repository", "pull_request"),)
    id: int | None = Field(default=None, primary_key=True)
    repository: str = Field(max_length=200)
    pull_request: int
    head_sha: str = Field(max_length=64)
    comment_id: int | None = Field(default=None, sa_type=BigInteger)
    check_run_id: int | None = Field(default=None, sa_type=BigInteger)
    consistency: dict[str, Any] | None = _json()
    updated_at: datetime = _when(default_factory=utcnow)
