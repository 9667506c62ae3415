"""The records the runner writes for one config in one upload, as the verdict corpus needs them.

With reruns on (the runner's CI default) a failing config is run again up to 2 times in the same
upload, stopping at the first pass, which is then `flaky: true`; an order-dependent config has a
failed shared attempt, a passed solo attempt and a failed final record with
`isolation: "order-dependent"`; a config that never started has one `not_run` record; a
segfault on one rank leaves the surviving ranks reporting NCCL's "remote process exited".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from cpci.schema import Isolation, Outcome, RankError, ResultRecord
from tests import builders

#: The runner's default in CI: the first attempt plus up to 2 reruns, stopping at the first pass.
ATTEMPTS_WITH_RERUNS = 3

FLAKY_SIGNATURES = (
    "AssertionError: Tensor-likes are not close! Mismatched elements: {n} / 65536 "
    "(max abs diff {d:.1e})",
    "AssertionError: softmax_lse not close on rank {r}: max abs diff {d:.1e} > atol 1e-3",
    "torch.distributed.DistBackendError: recv from rank {r} returned a stale KV chunk {n}",
    "AssertionError: dq differs from the reference after ring step {n}",
)
REGRESSION_SIGNATURE = (
    "AssertionError: out differs from the single-GPU reference: max abs diff {d:.2f} (atol 1e-2)"
)
BROKEN_SIGNATURE = "RuntimeError: CP all_gather of KV got shape [{n}, 64] (broken on main)"
SEGFAULT = "Fatal Python error: Segmentation fault (in flash_attn_varlen_fwd)"
SURVIVOR = (
    "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited or there "
    "was a network error, NCCL version 2.21.5"
)
ORDER_DEPENDENT = "AssertionError: out not close after the configs before it changed the cache"
NOT_RUN = "not run: the world did not come up after 2 respawns"


class ConfigName(Protocol):
    """What a record needs of a config: its identity."""

    @property
    def nodeid(self) -> str: ...
    @property
    def world_size(self) -> int: ...


@dataclass(frozen=True)
class Failure:
    """How one attempt fails: the outcome and what each rank reported."""

    outcome: Outcome
    errors: tuple[RankError, ...]


def record(
    c: ConfigName,
    outcome: Outcome,
    attempt: int,
    errors: Sequence[RankError] = (),
    *,
    flaky: bool = False,
    isolation: Isolation | None = None,
) -> ResultRecord:
    return builders.record(
        outcome=outcome,
        nodeid=c.nodeid,
        world_size=c.world_size,
        backend="nccl",
        duration_s=round(1.0 + 0.5 * c.world_size + 0.01 * attempt, 3),
        rank_errors=list(errors),
        attempt=attempt,
        flaky=flaky,
        isolation=isolation,
    )


def failure(message: str, rank: int, outcome: Outcome = "failed") -> Failure:
    return Failure(outcome, (RankError(rank=rank, phase="call", message=message),))


def attempts(
    c: ConfigName, draw: Callable[[int], Failure | None], reruns: bool
) -> list[ResultRecord]:
    """A config's records in one upload: attempts until the first pass (a pass after a failure
    is `flaky: true`), at most 3 with reruns on, 1 with them off."""
    records = []
    for attempt in range(1, (ATTEMPTS_WITH_RERUNS if reruns else 1) + 1):
        failed = draw(attempt)
        if failed is None:
            records.append(record(c, "passed", attempt, flaky=attempt > 1))
            break
        records.append(record(c, failed.outcome, attempt, failed.errors))
    return records


def red(records: Sequence[ResultRecord]) -> bool:
    return any(r.outcome != "passed" for r in records)


def crash(world_size: int, culprit: int) -> Failure:
    """A segfault on `culprit`; every other rank then sees its peer vanish."""
    errors = [RankError(rank=culprit, phase="world", message=SEGFAULT)]
    errors += [
        RankError(rank=r, phase="call", message=SURVIVOR) for r in range(world_size) if r != culprit
    ]
    return Failure("crashed", tuple(sorted(errors, key=lambda e: e.rank)))


def never_ran(c: ConfigName) -> list[ResultRecord]:
    return [record(c, "not_run", 1, [RankError(rank=-1, phase="world", message=NOT_RUN)])]


def order_dependent(c: ConfigName) -> list[ResultRecord]:
    """Failed in its shared world, passed alone, failed again after the same predecessors."""
    errors = failure(ORDER_DEPENDENT, 0).errors
    return [
        record(c, "failed", 1, errors),
        record(c, "passed", 2),
        record(c, "failed", 3, errors, isolation="order-dependent"),
    ]
