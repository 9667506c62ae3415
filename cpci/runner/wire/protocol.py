"""What the parent and the ranks of a world tell each other: the runner's internal protocol.

Everything crosses the process boundary through files in the world directory (never stdout,
which libraries scribble on) or the world's c10d store (between the ranks, never a process group a
test could destroy), and every message is one of the typed records below, named once:

- `WorldPlan` (parent -> ranks, `plan.json`): how the world runs (backend, pytest arguments, what
  to collect), written before launch;
- `FeedMessage` (parent -> ranks, `feed.jsonl`): the configs to run, each a `PlanEntry`, appended
  while the world runs, then a `Close`; every rank reads the same file, so all run the same order;
- `JournalEvent` (each rank -> parent, `rank-N.journal`): hello, ready, begin, left (a torch
  harness test's part), end, done;
- `RankPayload` (each rank -> rank 0, through the world's store: `cpci.runner.rank.control_plane`):
  one rank's view of a config;
- `AgreedRecord` (rank 0 -> parent, `outcomes.jsonl`): the config's outcome as its ranks agreed.

A config's *plan index* (`index`) is its position in its group (the configs of one world size and
backend, `cpci.runner.parent.planning.Group`); every record names it so, and the parent maps it back
to the config's `ConfigSpec`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from cpci.schema import Finite, MetricName, RankError

#: The process-group backends a world can run on.
Backend = Literal["gloo", "nccl"]
BACKENDS: tuple[Backend, ...] = get_args(Backend)

#: pytest's outcome for one config on one rank, most severe first (the agreed outcome is the most
#: severe of the ranks' outcomes). A subset of `cpci.schema.Outcome`.
LocalOutcome = Literal["error", "failed", "xpassed", "passed", "xfailed", "skipped"]
SEVERITY: tuple[LocalOutcome, ...] = get_args(LocalOutcome)

#: A pytest report as `pytest_report_to_serializable` gives it (pytest owns its shape).
SerializedReport = dict[str, Any]


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WorldPlan(_Message):
    """What every rank of one world reads at start-up; its configs come through the feed."""

    backend: Backend
    invocation_dir: str
    pytest_args: list[str]
    pg_timeout_s: float = Field(gt=0, description="the process group's own timeout (a backstop)")
    collect: list[str] = Field(
        description="what the ranks' pytest collects: enough for any config the feed may bring"
    )


class PlanEntry(_Message):
    """One config the world is to run next (a line of the feed)."""

    kind: Literal["config"] = "config"
    index: int = Field(ge=0, description="plan index: the config's position in its group")
    nodeid: str


class Close(_Message):
    """The last line of a feed: no config follows, the ranks finish and leave."""

    kind: Literal["close"] = "close"


FeedMessage = Annotated[PlanEntry | Close, Field(discriminator="kind")]
_FEED_MESSAGE: TypeAdapter[PlanEntry | Close] = TypeAdapter(FeedMessage)


def parse_feed_message(line: bytes) -> PlanEntry | Close:
    """One line of a world's feed as its typed message."""
    return _FEED_MESSAGE.validate_json(line)


class Hello(_Message):
    """The rank's process is up (its pid is what the parent signals for a stack dump)."""

    ev: Literal["hello"] = "hello"
    pid: int
    t: float


class Ready(_Message):
    """The rank joined its process group and is about to collect."""

    ev: Literal["ready"] = "ready"
    t: float
    backend: Backend


class Begin(_Message):
    """The rank began a config: if the world dies now, this config is the culprit."""

    ev: Literal["begin"] = "begin"
    index: int
    t: float


class End(_Message):
    """The rank finished a config itself, before agreeing on it with the others.

    Its errors ride along so the parent can still say why this rank failed if another one then
    hangs; `failed_t` (when its first failing phase ended) lets the rank that failed first lead;
    `collective` (the torch.distributed call its first failure was raised in, e.g.
    `barrier(group=[0, 1])`) says which wait went unanswered when its peers had left.
    """

    ev: Literal["end"] = "end"
    index: int
    t: float
    outcome: LocalOutcome
    errors: list[RankError]
    failed_t: float | None = None
    collective: str | None = None


class Left(_Message):
    """The rank's part of a torch harness test ended (`cpci.runner.rank.testcase_adapter`), before
    the rank waits for the other ranks' parts; `errors` when it failed as the harness counts a
    failure.

    Stock, a rank that fails exits, closing its connections, and the harness's parent terminates
    the others. In a cpci world the failed rank lives on, and a process group of the test that
    it still holds can keep its peers waiting; so the parent ends the world when the others stay
    inside their parts after one failed (`cpci.runner.parent.launched_world`).
    """

    ev: Literal["left"] = "left"
    index: int
    t: float
    errors: list[RankError]


class Done(_Message):
    """The rank ran every config and left its process group."""

    ev: Literal["done"] = "done"
    t: float


JournalEvent = Annotated[Hello | Ready | Begin | Left | End | Done, Field(discriminator="ev")]
_JOURNAL_EVENT: TypeAdapter[Hello | Ready | Begin | Left | End | Done] = TypeAdapter(JournalEvent)


def parse_journal_event(line: bytes) -> Hello | Ready | Begin | Left | End | Done:
    """One line of a rank's journal as its typed event."""
    return _JOURNAL_EVENT.validate_json(line)


class RankPayload(_Message):
    """One rank's view of one config, gathered by rank 0 to agree on the outcome."""

    rank: int
    outcome: LocalOutcome
    reports: list[SerializedReport]
    errors: list[RankError]
    metrics: dict[MetricName, Finite]


class AgreedRecord(_Message):
    """One config's outcome as all its ranks agreed on it: rank 0's line in `outcomes.jsonl`.

    Bounded as a results line is, so one the parent reads always makes a valid `ResultRecord`;
    a line it cannot read fails its config alone (`cpci.runner.parent.launched_world`).
    """

    index: int
    outcome: LocalOutcome
    duration_s: Finite = Field(ge=0)
    rank_errors: list[RankError] = Field(description="every failing rank's errors")
    reports: list[SerializedReport] = Field(description="the reports of the rank shown to users")
    report_rank: int
    metrics: dict[MetricName, Finite] = Field(description="each metric's max over the ranks")
    metrics_partial: list[int] = Field(
        default_factory=list,
        description="failing ranks that recorded none of some metric the others recorded",
    )


def parse_agreed_record(line: bytes) -> AgreedRecord:
    """One line of `outcomes.jsonl` as its typed record."""
    return AgreedRecord.model_validate_json(line)
