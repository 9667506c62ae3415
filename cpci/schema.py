"""The result and run records shared by the runner, the uploader and the service.

One module, so the three never drift apart: the runner writes `cpci.result/1` lines, the uploader
wraps them in a `cpci.run/1` envelope, and the service validates that envelope with these very
models. Bump the version suffix on any incompatible change and keep reading the old one.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

RESULT_SCHEMA = "cpci.result/1"
RUN_SCHEMA = "cpci.run/1"
SUPPORTED_RUN_SCHEMAS = (RUN_SCHEMA,)

Outcome = Literal[
    "passed", "failed", "skipped", "xfailed", "xpassed", "error", "crashed", "timeout", "not_run"
]
OUTCOMES: tuple[Outcome, ...] = (
    "passed",
    "failed",
    "skipped",
    "xfailed",
    "xpassed",
    "error",
    "crashed",
    "timeout",
    "not_run",
)
#: Outcomes that make a run red. `not_run` (the config never started: its world did not come up,
#: its batch gave up after respawns, the scheduler failed) is red too, but it says nothing about
#: the code under test: the service gives it the INFRA verdict, never NEW FAILURE.
FAILING_OUTCOMES: frozenset[str] = frozenset({"failed", "error", "crashed", "timeout", "not_run"})
#: Outcomes that say the config never ran at all.
NOT_RUN_OUTCOMES: frozenset[str] = frozenset({"not_run"})

#: What isolating a failure in a fresh world found (`--cpci-isolate-failures`).
Isolation = Literal["fails-alone", "order-dependent", "flaky"]

JSONScalar = str | int | float | bool | None
MetricName = Annotated[str, Field(min_length=1, max_length=200)]
#: NaN and infinities are refused at the door: they break comparisons, drift analysis and
#: PostgreSQL's JSON columns alike.
Finite = Annotated[float, Field(allow_inf_nan=False)]
#: Counts and numbers are stored in 32-bit integer columns: anything larger is refused here.
INT32_MAX = 2**31 - 1
#: More shards than any CI matrix runs: every read lists the missing ones, so the count is bounded.
MAX_SHARDS = 10_000
#: A matrix leg's name (e.g. `a100,gpu,linux`): bounded like the column it is stored in.
MAX_LEG_LENGTH = 200
#: Stored identities must not hold NUL (PostgreSQL text cannot); messages are cleaned instead.
Identity = Annotated[str, Field(pattern=r"^[^\x00]*$")]
LegName = Annotated[str, Field(min_length=1, max_length=MAX_LEG_LENGTH, pattern=r"^[^\x00]*$")]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class RankError(_Model):
    """What one rank saw go wrong: the first line for tables, the full text for people."""

    rank: int = Field(le=INT32_MAX, ge=-1, description="rank, or -1 for the world as a whole")
    phase: str = Field(description="setup, call, teardown, or world (crash, timeout)")
    message: str = Field(max_length=2_000)
    detail: str = Field(default="", max_length=200_000)


class BatchInfo(_Model):
    """Which batch and which world of that batch a config ran in."""

    index: int = Field(le=INT32_MAX, ge=0, description="batch number in the plan")
    world: int = Field(
        le=INT32_MAX, ge=0, description="0 for the batch's first world, n after n respawns"
    )
    size: int = Field(le=INT32_MAX, ge=1, description="configs in the batch")
    start_s: float | None = Field(
        default=None, ge=0, description="that world's start-up: launch to its first config"
    )


class ResultRecord(_Model):
    """One config's outcome: one line of the runner's JSON-lines results file."""

    schema_: Literal["cpci.result/1"] = Field(default="cpci.result/1", alias="schema")
    nodeid: Identity = Field(min_length=1, max_length=2_000)
    world_size: int = Field(le=INT32_MAX, ge=1)
    backend: str | None = None
    params: dict[str, JSONScalar] = Field(default_factory=dict)
    outcome: Outcome
    duration_s: Finite = Field(ge=0)
    rank_errors: list[RankError] = Field(default_factory=list)
    attempt: int = Field(
        default=1, le=INT32_MAX, ge=1, description="1 for the first run, more for reruns"
    )
    isolation: Isolation | None = None
    flaky: bool = False
    metrics: dict[MetricName, Finite] = Field(default_factory=dict)
    batch: BatchInfo | None = None

    @property
    def config_id(self) -> str:
        return config_id(self.nodeid, self.world_size)

    def to_json_line(self) -> str:
        return json.dumps(self.model_dump(mode="json", by_alias=True), sort_keys=True) + "\n"


class Environment(_Model):
    """What the results were produced on; part of a config's identity for flakiness."""

    python: str | None = None
    torch: str | None = None
    cuda: str | None = None
    nccl: str | None = None
    gpu: str | None = None
    backend: str | None = None
    platform: str | None = None


class RunEnvelope(_Model):
    """One shard's upload: where and when the results were produced, and the results."""

    schema_: Literal["cpci.run/1"] = Field(default="cpci.run/1", alias="schema")
    repository: str = Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
    commit: str = Field(pattern=r"^[0-9a-f]{7,64}$")
    branch: Identity | None = Field(default=None, max_length=255)
    pull_request: int | None = Field(default=None, le=INT32_MAX, ge=1)
    base_commit: str | None = Field(default=None, pattern=r"^[0-9a-f]{7,64}$")
    ci_run_id: Identity = Field(min_length=1, max_length=100)
    ci_attempt: int = Field(default=1, le=INT32_MAX, ge=1)
    shard_index: int = Field(default=0, lt=MAX_SHARDS, ge=0)
    shard_total: int = Field(default=1, le=MAX_SHARDS, ge=1)
    leg: Identity = Field(
        default="",
        max_length=MAX_LEG_LENGTH,
        description="the matrix leg (e.g. its sorted runner labels): shards of one run on "
        "different legs are different shards, even with the same index",
    )
    legs: list[LegName] = Field(
        default_factory=list,
        max_length=100,
        description="every leg the workflow's matrix declares, so a leg that never uploads is "
        "missing rather than unknown (empty: the legs seen are all there are)",
    )
    runner_name: Identity | None = Field(default=None, max_length=255)
    runner_labels: list[str] = Field(default_factory=list)
    environment: Environment = Field(default_factory=Environment)
    started_at: datetime | None = None
    ended_at: datetime | None = None
    results: list[ResultRecord]


def config_id(nodeid: str, world_size: int) -> str:
    """A config's stable identity: its pytest node id plus the world size it ran with."""
    return f"{nodeid}@{world_size}"


def read_results(path: str) -> list[ResultRecord]:
    """Read a results file, skipping a torn last line (the run was killed mid-write).

    Any other bad line is an error naming its line number: silently dropping results is how
    regressions go unnoticed.
    """
    records: list[ResultRecord] = []
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    complete, torn = lines[:-1], lines[-1]
    for number, line in enumerate(complete, start=1):
        if line.strip():
            records.append(_parse_line(line, path, number))
    if torn.strip():
        try:
            records.append(_parse_line(torn, path, len(lines)))
        except ValueError:
            pass  # a line without its newline was being written when the run died
    return records


def _parse_line(line: str, path: str, number: int) -> ResultRecord:
    try:
        data: Any = json.loads(line)
        return ResultRecord.model_validate(data)
    except ValueError as exc:
        raise ValueError(f"{path}:{number}: not a {RESULT_SCHEMA} record: {exc}") from exc
