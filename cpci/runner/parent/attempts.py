"""Reruns, failure isolation and arrival runs: what happens to a config after its first world.

One failure on its own says little: the service weighs a failure against the config's own
flakiness, and a same-commit rerun is the evidence that tells "k of k failed" from "failed once,
then passed". So a config that failed (failed, error, crashed, timeout) is rerun alone, each time
in a fresh world of its size, while the rerun rule (`RerunPolicy.decide`, the evidence rule
`cpci.evidence.decide_rerun`) says a rerun can still change its verdict, up to `--cpci-reruns`:

- a pass after failures is reported passed with `flaky: true` (pytest shows FLAKY);
- a failure the chance test already calls the PR's stops there ("decided after k attempt(s)");
- when every attempt failed, the last one stands, with a world-level note "failed N/N attempts".

Each rerun's record says why it was made (`rerun_reason`: the decision after the attempt before
it), the final record why no more were (`stop_reason`). With fixed reruns the rule reruns every
failure to the cap, stopping at its first pass.

With `isolate` (`--cpci-isolate-failures`) a config that failed in a shared world is always run
alone at least once, and that alone run is the first rerun. Failing alone as well means broken
(`isolation: "fails-alone"`). Passing on its first alone run, then failing again when replayed
after the same predecessors, means order-dependent: a failure (never "mixed"). Its predecessors
are then bisected in fresh worlds (`cpci.runner.parent.bisection`, at most ceil(log2 n) + 2
replays, `--cpci-bisect-time`), and the final record names the polluter (`order_dependence`, and
the note leading its `rank_errors`: "fails after X; found in 5 replays among 8 predecessors"), or
the smallest set found where no single predecessor explains it. Passing in the replay too means
flaky.

A config new to the base branch (or whose test file the PR changed) that passed its first
attempt gets `--cpci-new-config-runs` more runs alone, each within the arrival budget, each
record marked `arrival: true`; the first failure among them ends them (a pass and a failure:
the service's FLAKY ON ARRIVAL) and is the final record, a failure. One that failed its first
attempt is rerun as any failure is, its reruns marked `arrival: true` too: a rerun that passes
shows the same thing, a flaky config being added.

A config that never ran (`not_run`) is not rerun: its world did not start, which says nothing
about its code. A rerun that itself never ran is not an attempt: reruns stop there and the last
attempt that ran stands. Attempt numbers count 1, 2, 3... per config across reruns, replays and
arrival runs, and every attempt is written to the results file; the last one is the final record.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from cpci.evidence import RERUN_OUTCOMES, RerunDecision
from cpci.runner.parent.attempt_records import AttemptRecord
from cpci.runner.parent.bisection import Bisection, ReplaySaw, bisect, replay_bound
from cpci.runner.parent.planning import ConfigSpec
from cpci.runner.parent.rerun_policy import RerunPolicy
from cpci.runner.wire.rank_errors import world_note
from cpci.schema import (
    FAILING_OUTCOMES,
    MAX_POLLUTERS,
    NOT_RUN_OUTCOMES,
    Isolation,
    OrderDependence,
    ResultRecord,
)

#: The rerun reason of the isolating alone run where the rule itself would not rerun.
ISOLATING = "--cpci-isolate-failures: failed in a shared world, so run alone once"


@dataclass(frozen=True)
class Attempt:
    """One run of a config and where it ran."""

    record: AttemptRecord
    before: list[ConfigSpec]  # configs that ran before it in its world
    shared: bool  # its world ran more than one config


@dataclass(frozen=True)
class Settled:
    """A config's final record, unsent, and whether the chance test decided its failure."""

    record: AttemptRecord
    decided: bool = False


#: Runs configs in order in one fresh world with the given attempt number and returns the last
#: one's record, unsent; None when the session is ending.
RunInFreshWorld = Callable[[list[ConfigSpec], int], AttemptRecord | None]
Send = Callable[[AttemptRecord], None]


def settle(
    first: Attempt,
    policy: RerunPolicy,
    run: RunInFreshWorld,
    send: Send,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> Settled:
    """Rerun a failed first attempt (already sent) as `policy` says, or give a passing new
    config its arrival runs; return the final record (`clock` times the polluter search).

    Each attempt but the final one goes to `send` as it becomes known; the final one is returned
    unsent, marked final.
    """
    if first.record.result.outcome not in RERUN_OUTCOMES:
        return Settled(_arrive(first, policy, run, send))
    isolating = policy.isolate and first.shared
    new = policy.is_new(first.record.result)  # its reruns are a new config's arrival runs
    attempts = _Attempts(first.record, send)
    decision = policy.decide(attempts.results)
    while decision.rerun or (isolating and attempts.ran == 1):
        why = decision.why if decision.rerun else ISOLATING
        if not attempts.run(run, [first.record.spec], why, arrival=new):
            break
        decision = policy.decide(attempts.results)
    if attempts.failed_last:
        isolation: Isolation | None = "fails-alone" if isolating and attempts.ran > 1 else None
        return Settled(attempts.final_failure(isolation, decision), decision.kind == "decided")
    # Failed only in the shared world: replay it after its predecessors, and bisect them.
    if isolating and attempts.failures == 1 and first.before:
        found = _search(attempts, first, policy, run, clock)
        if found.polluters is not None:
            return Settled(attempts.order_dependent(found, first.before))
    return Settled(attempts.flaky("flaky" if isolating else None, decision))


def _search(
    attempts: _Attempts,
    first: Attempt,
    policy: RerunPolicy,
    run: RunInFreshWorld,
    clock: Callable[[], float],
) -> Bisection[ConfigSpec]:
    """Bisect the predecessors of a config that failed in its shared world and passed alone."""
    spec, before = first.record.spec, first.before
    bound = replay_bound(len(before))

    def replay(predecessors: list[ConfigSpec]) -> ReplaySaw:
        why = (
            f"order dependence: replay {attempts.replays + 1} of at most {bound}, after "
            f"{len(predecessors)} of its {len(before)} predecessor(s) in its shared world"
        )
        if not attempts.run(run, [*predecessors, spec], why, replay=True):
            return "nothing"
        return "failed" if attempts.failed_last else "passed"

    return bisect(before, replay, deadline_s=policy.bisect_time, clock=clock)


def _arrive(first: Attempt, policy: RerunPolicy, run: RunInFreshWorld, send: Send) -> AttemptRecord:
    """A passing new config's arrival runs: up to K more, alone, each within the budget; the
    first failure ends them."""
    result = first.record.result
    k = policy.arrival_runs(result)
    attempts = _Attempts(first.record, send, failures=0)
    why_new = policy.why_new(result)
    budget = policy.arrival_budget
    for i in range(1, k + 1):
        estimate = attempts.latest.result.duration_s
        if budget is not None and not budget.admit(estimate):
            attempts.stopped = (
                f"arrival run {i} of {k} not started: new configs' runs would take more than "
                f"{budget.share:.0%} of the shard's time (--cpci-new-config-share)"
            )
            break
        why = f"new config: arrival run {i} of {k} (--cpci-new-config-runs): {why_new}"
        ran = attempts.run(run, [first.record.spec], why, arrival=True)
        if budget is not None:
            budget.spent(estimate, attempts.latest.result.duration_s if ran else 0.0)
        if not ran or attempts.failed_last:
            break
    return attempts.arrived(k)


class _Attempts:
    """The attempts of one config so far; the latest is held back until it is known not final."""

    def __init__(self, first: AttemptRecord, send: Send, *, failures: int = 1) -> None:
        self.latest = first
        self.results: list[ResultRecord] = [first.result]  # what the rerun rule weighs
        self.last_failure = first if failures else None
        self._held = False  # whether `latest` is still unsent
        self._send = send
        self.ran = 1
        self.failures = failures
        self.replays = 0
        self.arrivals = 0
        self.stopped: str | None = None

    def run(
        self,
        run: RunInFreshWorld,
        specs: list[ConfigSpec],
        why: str,
        *,
        replay: bool = False,
        arrival: bool = False,
    ) -> bool:
        """One more attempt, made for `why`; False (and no attempt counted) when it never ran.
        Only alone reruns are weighed by the rerun rule (a replay's predecessors change it)."""
        number = self.latest.result.attempt + 1
        ran = run(specs, number)
        if ran is None or ran.result.outcome in NOT_RUN_OUTCOMES:
            said = "the session is ending" if ran is None else _first_message(ran.result)
            self.stopped = f"reruns stopped after attempt {number - 1}: {said}"
            return False
        if self._held:
            self._send(self.latest)
        marked = ran.result.model_copy(update={"rerun_reason": why, "arrival": arrival})
        self.latest, self._held = replace(ran, result=marked), True
        self.ran += 1
        self.replays += replay
        self.arrivals += arrival
        if not replay:
            self.results.append(marked)
        if self.failed_last:
            self.failures += 1
            self.last_failure = self.latest
        return True

    @property
    def failed_last(self) -> bool:
        return self.latest.result.outcome in FAILING_OUTCOMES

    def _stop_reason(self, why: str) -> str:
        return f"{why}; {self.stopped}" if self.stopped else why

    def _final(self, result: ResultRecord, note: str, *, own: bool = True) -> AttemptRecord:
        """The final record; `own`: it shows the latest attempt's own reports."""
        latest = self.latest if own else replace(self.latest, reports=None)
        return replace(latest, result=result, final=True, note=note, recorded=not self._held)

    def final_failure(self, isolation: Isolation | None, stop: RerunDecision) -> AttemptRecord:
        result = self.latest.result
        notes = [f"failed {self.failures}/{self.ran} attempts"] if self.ran > 1 else []
        if self.stopped:
            notes.append(self.stopped)
        if self._held:  # a record already written stays as it was written
            extra = [world_note("rerun", n) for n in notes]
            result = result.model_copy(
                update={
                    "isolation": isolation,
                    "rank_errors": [*result.rank_errors, *extra],
                    "stop_reason": self._stop_reason(stop.why),
                }
            )
        return self._final(result, "; ".join(notes) if notes else "")

    def order_dependent(
        self, found: Bisection[ConfigSpec], before: list[ConfigSpec]
    ) -> AttemptRecord:
        """The final record of a config that fails after (some of) its predecessors."""
        assert found.polluters is not None, "only an order-dependent search names polluters"
        assert self.last_failure is not None, "a search that found some saw a failure"
        named = [s.nodeid for s in found.polluters]
        dependence = OrderDependence(
            polluters=named[:MAX_POLLUTERS], replays=found.replays, searched=found.searched
        )
        message = f"order-dependent: passes alone, {dependence.text()}"
        failing = self.last_failure
        lines = [
            "Failed in a shared world, passed alone, and failed again when replayed after the "
            "configs that ran before it there; bisecting them in fresh worlds "
            f"({found.replays} replay(s), at most {replay_bound(found.searched)}) found: "
            f"{dependence.text()}."
        ]
        if found.stopped:
            lines.append(f"The search ended early: {found.stopped}.")
        if failing is not self.latest:
            lines.append(
                f"The last replay (attempt {self.latest.result.attempt}) passed; the errors "
                f"below are attempt {failing.result.attempt}'s."
            )
        if len(named) > MAX_POLLUTERS:
            lines.append(f"The set found holds {len(named)} configs: {', '.join(named)}.")
        lines.append(f"Its {len(before)} predecessor(s), in the order they ran:")
        lines.extend(s.nodeid for s in before)
        note = world_note("isolation", message, "\n".join(lines))
        result = self.latest.result.model_copy(
            update={
                "outcome": "failed",
                "isolation": "order-dependent",
                "order_dependence": dependence,
                "rank_errors": [note, *failing.result.rank_errors],
                "stop_reason": self._stop_reason(f"order-dependent: {dependence.text()}"),
            }
        )
        shown = message.removeprefix("order-dependent: ")
        return self._final(result, f"ORDER-DEPENDENT: {shown}", own=failing is self.latest)

    def flaky(self, isolation: Isolation | None, stop: RerunDecision) -> AttemptRecord:
        why = stop.why
        if self.replays:
            why += "; it passed again when replayed after its predecessors: not order-dependent"
        result = self.latest.result.model_copy(
            update={"flaky": True, "isolation": isolation, "stop_reason": self._stop_reason(why)}
        )
        note = f"FLAKY: failed {self.failures} of {self.ran} attempts, then passed when rerun alone"
        if self.stopped:
            note += f"; {self.stopped}"
        return self._final(result, note)

    def arrived(self, k: int) -> AttemptRecord:
        """The final record of a new config's arrival runs: the failing one, or the last."""
        made = f"{self.arrivals} of {k} arrival run(s)"
        if not self._held:  # none ran: the first attempt, already written, stands
            return self._final(self.latest.result, self._stop_reason(f"{made} made"))
        if not self.failed_last:
            why = self._stop_reason(f"passed {self.ran}/{self.ran} runs ({made})")
            result = self.latest.result.model_copy(update={"stop_reason": why})
            return self._final(result, f"NEW CONFIG: {why}")
        message = (
            f"flaky on arrival: passed its first run, then failed arrival run {self.arrivals} "
            f"of {k}, alone in a fresh world"
        )
        why = f"{message}: a pass and a failure, nothing more to learn"
        result = self.latest.result.model_copy(
            update={
                "rank_errors": [world_note("arrival", message), *self.latest.result.rank_errors],
                "stop_reason": why,
            }
        )
        shown = message.removeprefix("flaky on arrival: ")
        return self._final(result, f"FLAKY ON ARRIVAL: {shown}")


def _first_message(result: ResultRecord) -> str:
    return result.rank_errors[0].message if result.rank_errors else result.outcome
