"""A config's result: one line of the runner's results file, read back by the uploader.

The runner writes `cpci.result/1` lines, the uploader wraps them in a `cpci.run/1` envelope
(`cpci.schema.envelope`), and the service validates them with these very models, so the three
never drift apart. Bump the version suffix on any incompatible change and keep reading the old one.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from cpci.schema.fields import INT32_MAX, Finite, Identity, MetricName, WireModel

RESULT_SCHEMA = "cpci.result/1"

#: Bounds of a result's texts. The runner checks what it plans (node ids) and clips what ranks
#: write (messages, details) to them where they are made, so no record is refused for its length.
MAX_NODEID_LENGTH = 2_000
MAX_MESSAGE_LENGTH = 2_000
MAX_DETAIL_LENGTH = 200_000

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
#: its group gave up after worlds in a row failed to start, the scheduler failed) is red too, but
#: it says nothing about the code under test: the service gives it the INFRA verdict, never NEW
#: FAILURE.
FAILING_OUTCOMES: frozenset[str] = frozenset({"failed", "error", "crashed", "timeout", "not_run"})
#: Outcomes that say the config never ran at all.
NOT_RUN_OUTCOMES: frozenset[str] = frozenset({"not_run"})

#: What isolating a failure in a fresh world found (`--cpci-isolate-failures`).
Isolation = Literal["fails-alone", "order-dependent", "flaky"]

#: What a rank reports when a *peer* left: NCCL's "remote process exited", gloo's "connection
#: closed/reset by peer". The consequence of another rank's failure or exit, never the cause,
#: whatever order the ranks' errors arrive in: the runner puts the other ranks first and says
#: what the peer did instead, where it knows.
PEER_LOST = re.compile(
    r"remote process exited|connection (reset|closed) by peer|peer (closed|disconnected)", re.I
)


def is_peer_lost(message: str) -> bool:
    """Whether `message` only echoes a peer's leaving (`PEER_LOST`)."""
    return PEER_LOST.search(message) is not None


def _param_text(value: Any) -> Any:
    """A parameter that is a NaN or infinite float is kept as its text (`nan`, `inf`), as the
    runner keeps any other value JSON cannot hold as its repr: a parameter names a config, it is
    never compared as a number, and a results line must stay strict JSON (metrics, which are
    compared, refuse such values instead: `Finite`)."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


#: A config's parameter value in a results line.
ParamValue = Annotated[str | int | float | bool | None, BeforeValidator(_param_text)]


class RankError(WireModel):
    """What one rank saw go wrong: the first line for tables, the full text for people."""

    rank: int = Field(le=INT32_MAX, ge=-1, description="rank, or -1 for the world as a whole")
    phase: str = Field(description="setup, call, teardown, or world (crash, timeout)")
    message: str = Field(max_length=MAX_MESSAGE_LENGTH)
    detail: str = Field(default="", max_length=MAX_DETAIL_LENGTH)


class BatchInfo(WireModel):
    """Where a config ran: its group (the configs of one world size and backend, one queue) and
    which of that group's worlds. The field names predate the pool and stay for compatibility."""

    index: int = Field(le=INT32_MAX, ge=0, description="the config's group number in the plan")
    world: int = Field(
        le=INT32_MAX,
        ge=0,
        description="the group's world it ran in, numbered in start order from 0 (worlds that "
        "replaced a dead one, ran at once with --cpci-workers, or ran reruns count too)",
    )
    size: int = Field(le=INT32_MAX, ge=1, description="configs in the group")
    start_s: float | None = Field(
        default=None, ge=0, description="that world's start-up: launch to its first config"
    )


#: The most predecessors an order-dependence result names (a world of 10,000 configs is not
#: bisected down to a set that large; it says how many it searched instead).
MAX_POLLUTERS = 256


class OrderDependence(WireModel):
    """An order-dependent failure bisected: it passes alone and fails after `polluters` (one
    config: the polluter; several: the smallest set found, where no single predecessor
    explains it), found in `replays` fresh-world replays among `searched` predecessors."""

    polluters: list[Annotated[Identity, Field(min_length=1, max_length=MAX_NODEID_LENGTH)]] = Field(
        min_length=1, max_length=MAX_POLLUTERS, description="the predecessors' node ids"
    )
    replays: int = Field(ge=0, le=INT32_MAX, description="fresh-world replays the search took")
    searched: int = Field(ge=1, le=INT32_MAX, description="predecessors it searched among")

    @property
    def single(self) -> bool:
        """Whether one predecessor explains it (most order dependencies: Wei et al. 2021)."""
        return len(self.polluters) == 1

    def text(self) -> str:
        """ "fails after X; found in 7 replays" or "fails after X, Y together (...)"."""
        shown = ", ".join(self.polluters[:5])
        more = f" and {len(self.polluters) - 5} more" if len(self.polluters) > 5 else ""
        replays = f"found in {self.replays} replay{'s' if self.replays != 1 else ''}"
        if self.single:
            return f"fails after {shown}; {replays} among {self.searched} predecessors"
        return (
            f"no single predecessor explains it; fails after {shown}{more} together (the "
            f"smallest set found, {replays} among {self.searched} predecessors)"
        )


class ResultRecord(WireModel):
    """One config's outcome: one line of the runner's JSON-lines results file."""

    schema_: Literal["cpci.result/1"] = Field(default="cpci.result/1", alias="schema")
    nodeid: Identity = Field(min_length=1, max_length=MAX_NODEID_LENGTH)
    world_size: int = Field(le=INT32_MAX, ge=1)
    backend: str | None = None
    params: dict[str, ParamValue] = Field(default_factory=dict)
    outcome: Outcome
    duration_s: Finite = Field(ge=0)
    rank_errors: list[RankError] = Field(default_factory=list)
    attempt: int = Field(
        default=1, le=INT32_MAX, ge=1, description="1 for the first run, more for reruns"
    )
    isolation: Isolation | None = None
    flaky: bool = False
    metrics: dict[MetricName, Finite] = Field(default_factory=dict)
    metrics_partial: list[Annotated[int, Field(ge=0, le=INT32_MAX)]] | None = Field(
        default=None,
        exclude_if=lambda ranks: ranks is None,
        description="the failing ranks that recorded none of some metric in `metrics` (they "
        "failed before recording it): each metric is then the max over the other ranks only. "
        "Absent when every failing rank recorded every metric, so readers of older lines and "
        "older readers of these lines are unaffected",
    )
    batch: BatchInfo | None = None
    rerun_reason: str | None = Field(
        default=None,
        max_length=MAX_MESSAGE_LENGTH,
        exclude_if=lambda why: why is None,
        description="attempts 2 and later: why this rerun happened, as the rerun decision "
        "(`cpci.evidence.decide_rerun`) said it after the attempt before. Absent unless set, "
        "like every field below: older lines and older readers are unaffected, and the "
        "service's upload hash of a record without them is what it was",
    )
    stop_reason: str | None = Field(
        default=None,
        max_length=MAX_MESSAGE_LENGTH,
        exclude_if=lambda why: why is None,
        description="the config's final record: why no further rerun was made (a pass, the "
        "chance test deciding the failure, the cap)",
    )
    arrival: bool = Field(
        default=False,
        exclude_if=lambda arrival: not arrival,
        description="one of the extra runs of a config new to the base branch (or whose test "
        "file the PR changed), `--cpci-new-config-runs`: a failure and a pass among them is "
        "FLAKY ON ARRIVAL",
    )
    order_dependence: OrderDependence | None = Field(
        default=None,
        exclude_if=lambda found: found is None,
        description="what bisecting an order-dependent failure's predecessors found: the "
        "polluter (or the smallest set of predecessors) after which it fails",
    )

    @property
    def config_key(self) -> str:
        """The config's `NODEID@WORLD_SIZE` key (`config_key`)."""
        return config_key(self.nodeid, self.world_size)

    @property
    def config_id(self) -> str:
        """Deprecated: the former name of `config_key` (see `CONFIG_ID_DEPRECATED`)."""
        warnings.warn(CONFIG_ID_DEPRECATED, DeprecationWarning, stacklevel=2)
        return self.config_key

    def to_json_line(self) -> str:
        data = self.model_dump(mode="json", by_alias=True)
        return json.dumps(data, sort_keys=True, allow_nan=False) + "\n"


def config_key(nodeid: str, world_size: int) -> str:
    """A config's stable identity, `NODEID@WORLD_SIZE`: its pytest node id plus the world size it
    ran with. (The service's integer row id of a config is its `config_pk`.)"""
    return f"{nodeid}@{world_size}"


#: Why `config_id` warns: a config's `NODEID@WORLD_SIZE` string is its `config_key`, and
#: `config_id` is the service's integer column (`result.config_id`, a config's row id). Scripts
#: that read results files may call the old name, so it stays, warning, until cpci 0.3.
CONFIG_ID_DEPRECATED = (
    "config_id is deprecated since 2026-12-01 and will be removed in cpci 0.3: use config_key "
    "(ResultRecord.config_key, cpci.schema.config_key)"
)


def config_id(nodeid: str, world_size: int) -> str:
    """Deprecated: the former name of `config_key` (see `CONFIG_ID_DEPRECATED`)."""
    warnings.warn(CONFIG_ID_DEPRECATED, DeprecationWarning, stacklevel=2)
    return config_key(nodeid, world_size)


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
