"""A record's `rank_errors`: how each entry is made, which rank's error leads, the world's notes.

Every entry the runner writes is made here, by `rank_error`: its message is the traceback's
error line (`error_line`; readers then show a message's first line, `cpci.schema.first_line`),
and both texts are clipped to the schema's bounds, since an entry the schema
refuses would lose the whole record.

The rank that failed first leads, not the lowest rank number, and never a rank that only
echoes a peer's leaving.

When one rank dies, the others fail after it and log what they saw (an NCCL "remote process
exited", a gloo "connection closed by peer"). Those echoes look like infrastructure trouble;
the cause is the rank that failed first. The service decides a failure's class from the first
entry of `rank_errors` only, so the runner puts that rank there, from the times in the ranks'
fsynced journals and exit files; a rank whose errors are all echoes (`cpci.schema.PEER_LOST`)
follows the others whatever its time, since failure times race. And where the peer did not die
but finished the config, so that cpci destroyed its groups under a rank still waiting in a
collective, the echo is told as that (`explain_lost_peers`), not as a crash.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import ValidationError

from cpci.schema import MAX_DETAIL_LENGTH, MAX_MESSAGE_LENGTH, RankError, is_peer_lost

#: Fields named in a refusal's message; its detail has every one.
_NAMED_FIELDS = 3
#: Characters of a field's key (e.g. a metric's name) quoted in a refusal's message.
_KEY_SHOWN = 40


def first_failing_first(
    errors: Sequence[RankError], failed_at: Mapping[int, float]
) -> list[RankError]:
    """`errors` with the ranks ordered by when they failed (`failed_at`, rank -> time).

    Ranks with a known failure time come first, earliest first, those that only echo a peer's
    leaving after the others; then the ranks without one (stopped by their launcher, still inside
    a hung config) in rank order; then world-level entries (rank -1). A rank's own entries keep
    their order (setup before teardown).
    """
    echoes = _echoing_ranks(errors)

    def key(error: RankError) -> tuple[int, float, int]:
        if error.rank < 0:
            return (3, 0.0, 0)
        when = failed_at.get(error.rank)
        if when is None:
            return (2, 0.0, error.rank)
        return (1 if error.rank in echoes else 0, when, error.rank)

    return sorted(errors, key=key)


def _echoing_ranks(errors: Sequence[RankError]) -> set[int]:
    """The ranks all of whose entries only echo a peer's leaving."""
    ranks = {e.rank for e in errors if e.rank >= 0}
    return {r for r in ranks if all(is_peer_lost(e.message) for e in errors if e.rank == r)}


def explain_lost_peers(
    errors: Sequence[RankError],
    outcomes: Mapping[int, str],
    collectives: Mapping[int, str | None],
) -> list[RankError]:
    """`errors` with each echo of a peer's leaving told as what happened, where the peers did
    not die but finished the config (`outcomes`: rank -> its own outcome, for the ranks that
    finished it): cpci destroyed the groups they made for it, and a rank still waiting in a
    collective on one of them (`collectives`: rank -> the collective its failure was raised in)
    saw gloo's "connection closed by peer ... typically caused by a remote worker crashing".
    Nothing crashed, so the message says "rank 1 finished the config (passed) and its groups were
    destroyed; rank 0 was still in barrier(group=[0, 1])", and the detail keeps the original."""
    echoes = _echoing_ranks(errors)
    peers = sorted(r for r in outcomes if r not in echoes)
    if not peers:
        return list(errors)  # every rank that said anything lost its peers: not ours to explain
    out = []
    for error in errors:
        if error.rank not in echoes or error.rank not in outcomes:
            out.append(error)
            continue
        collective = collectives.get(error.rank) or "a collective with them"
        message = (
            f"{_finished(peers, outcomes)} and {'its' if len(peers) == 1 else 'their'} groups were "
            f"destroyed; rank {error.rank} was still in {collective}"
        )
        out.append(rank_error(error.rank, error.phase, error.detail, message))
    return out


def _finished(peers: list[int], outcomes: Mapping[int, str]) -> str:
    """`rank 1 finished the config (passed)`, `ranks 1, 2 finished the config (passed)`, or
    `ranks 1 (failed), 2 (passed) finished the config`."""
    kinds = {outcomes[r] for r in peers}
    if len(kinds) == 1:
        return f"{ranks_text(peers)} finished the config ({kinds.pop()})"
    each = ", ".join(f"{r} ({outcomes[r]})" for r in peers)
    return f"ranks {each} finished the config"


def ranks_text(ranks: Sequence[int]) -> str:
    """`rank 0` or `ranks 0, 2`."""
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {', '.join(map(str, ranks))}"


def error_line(text: str) -> str:
    """The line of a pytest traceback that says what failed: the first `E   ` line, else the
    last non-empty one (an exception's own line ends a plain traceback)."""
    lines = [line for line in text.splitlines() if line.strip()]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    if errors:
        return errors[0][:MAX_MESSAGE_LENGTH]
    return (lines[-1].strip() if lines else "")[:MAX_MESSAGE_LENGTH]


def exception_line(traceback_text: str) -> str:
    """The exception's own line of a Python traceback (`AssertionError: rank 1 says no`): the
    first unindented line after its last frame, else (no frame) its last non-empty line."""
    lines = [line for line in traceback_text.splitlines() if line.strip()]
    frames = [n for n, line in enumerate(lines) if line.startswith("  File ")]
    after = lines[frames[-1] + 1 :] if frames else []
    return next((line for line in after if not line[0].isspace()), lines[-1] if lines else "")


def rank_error(rank: int, phase: str, detail: str, message: str | None = None) -> RankError:
    """One entry of `rank_errors`, clipped to the schema's bounds.

    `message` defaults to the first line of `detail`. Texts may quote tracebacks, node ids and
    rank logs of any length.
    """
    headline = error_line(detail) if message is None else message
    return RankError(
        rank=rank,
        phase=phase,
        message=headline[:MAX_MESSAGE_LENGTH],
        detail=detail[:MAX_DETAIL_LENGTH],
    )


def world_note(phase: str, message: str, detail: str = "") -> RankError:
    """A world-level entry (rank -1) written by the runner itself."""
    return rank_error(-1, phase, detail, message)


def refusal(rank: int, what: str, exc: ValidationError) -> RankError:
    """An entry saying cpci could not accept `what` (a rank's payload, the ranks' record of a
    config), naming each field the schema refused and why, so that the config it belongs to fails
    with the reason rather than the group it ran in.

    `rank` is the rank whose view was refused, or -1 for the record as a whole.
    """
    problems = exc.errors()
    named = "; ".join(f"{_field(p['loc'])}: {p['msg']}" for p in problems[:_NAMED_FIELDS])
    more = len(problems) - _NAMED_FIELDS
    message = f"cpci could not accept {what}: {named}" + (f" (and {more} more)" if more > 0 else "")
    return rank_error(rank, "world", f"{message}\n{exc}", message)


def _field(loc: tuple[int | str, ...]) -> str:
    """A refused field's place: `rank_errors[0].message`, `metrics.mmm... (key)`; long keys cut."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part == "[key]":
            text += " (key)"
        else:
            shown = part if len(part) <= _KEY_SHOWN else f"{part[:_KEY_SHOWN]}..."
            text += f".{shown}" if text else shown
    return text
