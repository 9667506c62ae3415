"""Reruns and failure isolation: what happens to a config after it fails in its first world.

One failure on its own says little: the service weighs a failure against the config's own
flakiness, and a same-commit rerun is the evidence that tells "k of k failed" from "failed once,
then passed". So a config that failed (failed, error, crashed, timeout) is rerun alone, each time
in a fresh world of its size, up to `reruns` times, stopping at its first pass:

- a pass after failures is reported passed with `flaky: true` (pytest shows FLAKY);
- when every attempt failed, the last one stands, with a world-level note "failed N/N attempts".

With `isolate` (`--cpci-isolate-failures`) a config that failed in a shared world is always run
alone at least once, and that alone run is the first rerun. Failing alone as well means broken
(`isolation: "fails-alone"`). Passing on its first alone run, then failing again when replayed
after the same predecessors, means order-dependent: a failure (never "mixed"), whose first
`rank_errors` entry names those predecessors. Passing in the replay too means flaky.

A config that never ran (`not_run`) is not rerun: its world did not start, which says nothing
about its code. A rerun that itself never ran is not an attempt: reruns stop there and the last
attempt that ran stands. Attempt numbers count 1, 2, 3... per config across reruns and replays,
and every attempt is written to the results file; the last one is the final record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from cpci.runner.parent.attempt_records import AttemptRecord
from cpci.runner.parent.planning import ConfigSpec
from cpci.runner.parent.rerun_policy import RerunPolicy
from cpci.runner.wire.rank_errors import world_note
from cpci.schema import FAILING_OUTCOMES, NOT_RUN_OUTCOMES, Isolation, ResultRecord

#: Predecessors named in an order-dependence message; the full list goes in its detail.
NAMED_PREDECESSORS = 3


@dataclass(frozen=True)
class Attempt:
    """One run of a config and where it ran."""

    record: AttemptRecord
    before: list[ConfigSpec]  # configs that ran before it in its world
    shared: bool  # its world ran more than one config


#: Runs configs in order in one fresh world with the given attempt number and returns the last
#: one's record, unsent; None when the session is ending.
RunInFreshWorld = Callable[[list[ConfigSpec], int], AttemptRecord | None]
Send = Callable[[AttemptRecord], None]


def settle(first: Attempt, policy: RerunPolicy, run: RunInFreshWorld, send: Send) -> AttemptRecord:
    """Rerun a failed first attempt (already sent) as `policy` says; return the final record.

    Each attempt but the final one goes to `send` as it becomes known; the final one is returned
    unsent, marked final.
    """
    spec = first.record.spec
    isolating = policy.isolate and first.shared
    attempts = _Attempts(first.record, send)
    for _ in range(policy.alone_runs(first.shared)):
        if not attempts.run(run, [spec]):
            break
        if not attempts.failed_last:
            break
    if attempts.failed_last:
        isolation: Isolation | None = "fails-alone" if isolating and attempts.ran > 1 else None
        return attempts.final_failure(isolation)
    # Failed only in the shared world: replay it after the same predecessors.
    replay = isolating and attempts.failures == 1 and bool(first.before)
    if replay and attempts.run(run, [*first.before, spec]) and attempts.failed_last:
        return attempts.order_dependent(first.before)
    return attempts.flaky("flaky" if isolating else None)


class _Attempts:
    """The attempts of one config so far; the latest is held back until it is known not final."""

    def __init__(self, first: AttemptRecord, send: Send) -> None:
        self.latest = first
        self._held = False  # whether `latest` is still unsent
        self._send = send
        self.ran = 1
        self.failures = 1
        self.stopped: str | None = None

    def run(self, run: RunInFreshWorld, specs: list[ConfigSpec]) -> bool:
        """One more attempt; False (and no attempt counted) when it never ran."""
        number = self.latest.result.attempt + 1
        ran = run(specs, number)
        if ran is None or ran.result.outcome in NOT_RUN_OUTCOMES:
            why = "the session is ending" if ran is None else _first_message(ran.result)
            self.stopped = f"reruns stopped after attempt {number - 1}: {why}"
            return False
        if self._held:
            self._send(self.latest)
        self.latest, self._held = ran, True
        self.ran += 1
        self.failures += ran.result.outcome in FAILING_OUTCOMES
        return True

    @property
    def failed_last(self) -> bool:
        return self.latest.result.outcome in FAILING_OUTCOMES

    def _final(self, result: ResultRecord, note: str) -> AttemptRecord:
        return replace(self.latest, result=result, final=True, note=note, recorded=not self._held)

    def final_failure(self, isolation: Isolation | None) -> AttemptRecord:
        result = self.latest.result
        notes = [f"failed {self.failures}/{self.ran} attempts"] if self.ran > 1 else []
        if self.stopped:
            notes.append(self.stopped)
        if self._held:  # a record already written stays as it was written
            extra = [world_note("rerun", n) for n in notes]
            result = result.model_copy(
                update={"isolation": isolation, "rank_errors": [*result.rank_errors, *extra]}
            )
        return self._final(result, "; ".join(notes) if notes else "")

    def order_dependent(self, before: list[ConfigSpec]) -> AttemptRecord:
        names = [s.nodeid for s in before]
        shown = ", ".join(names[:NAMED_PREDECESSORS])
        if len(names) > NAMED_PREDECESSORS:
            shown += f" and {len(names) - NAMED_PREDECESSORS} more"
        message = f"order-dependent: passes alone, fails after {shown}"
        detail = (
            "Failed in a shared world, passed alone, and failed again when run after the configs "
            "that ran before it in that world:\n" + "\n".join(names)
        )
        note = world_note("isolation", message, detail)
        result = self.latest.result.model_copy(
            update={
                "outcome": "failed",
                "isolation": "order-dependent",
                "rank_errors": [note, *self.latest.result.rank_errors],
            }
        )
        return self._final(result, f"ORDER-DEPENDENT: {message.removeprefix('order-dependent: ')}")

    def flaky(self, isolation: Isolation | None) -> AttemptRecord:
        result = self.latest.result.model_copy(update={"flaky": True, "isolation": isolation})
        note = f"FLAKY: failed {self.failures} of {self.ran} attempts, then passed when rerun alone"
        if self.stopped:
            note += f"; {self.stopped}"
        return self._final(result, note)


def _first_message(result: ResultRecord) -> str:
    return result.rank_errors[0].message if result.rank_errors else result.outcome
