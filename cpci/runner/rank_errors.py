"""A record's `rank_errors`: which rank's error leads, and the runner's own world-level notes.

The rank that failed first leads, not the lowest rank number.

When one rank dies, the others fail after it and log what they saw (an NCCL "remote process
exited", a gloo "connection closed by peer"). Those echoes look like infrastructure trouble;
the cause is the rank that failed first. The service decides a failure's class from the first
entry of `rank_errors` only, so the runner puts that rank there, from the times in the ranks'
fsynced journals and exit files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cpci.schema import RankError

#: RankError's bounds (cpci.schema): notes are clipped to them rather than refused.
MESSAGE_MAX = 2_000
DETAIL_MAX = 200_000


def first_failing_first(
    errors: Sequence[RankError], failed_at: Mapping[int, float]
) -> list[RankError]:
    """`errors` with the ranks ordered by when they failed (`failed_at`, rank -> time).

    Ranks with a known failure time come first, earliest first; then the ranks without one
    (stopped by torchrun, still inside a hung config) in rank order; then world-level entries
    (rank -1). A rank's own entries keep their order (setup before teardown).
    """

    def key(error: RankError) -> tuple[int, float, int]:
        if error.rank < 0:
            return (2, 0.0, 0)
        when = failed_at.get(error.rank)
        return (0, when, error.rank) if when is not None else (1, 0.0, error.rank)

    return sorted(errors, key=key)


def world_note(phase: str, message: str, detail: str = "") -> RankError:
    """A world-level entry (rank -1) written by the runner itself, clipped to the schema's bounds.

    Its text may quote node ids and rank logs of any length; an entry the schema refuses would
    lose the whole record.
    """
    return RankError(
        rank=-1, phase=phase, message=message[:MESSAGE_MAX], detail=detail[:DETAIL_MAX]
    )
