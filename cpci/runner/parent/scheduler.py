"""Running configs: a pool of long-lived worlds fed from one queue per group, and reruns.

Each group (the configs of one world size and backend, `cpci.runner.parent.planning.Group`) is a
queue. Worker threads (`--cpci-workers`) each start a world for a group that has configs queued and
feed it from that queue until the queue is empty or the world has taken `world_cap` configs
(`--cpci-batch-size`; None: no cap), then close it. Several workers may feed worlds of the same
group, so a slow config holds up only its own world: the others take the rest of the queue.

When a world dies or hangs, the config in flight is reported (crashed or timeout: it ran) and the
configs it had been fed but not begun go back to the front of their queue, for the next world of
that group to take; a fresh world takes its place. A crash with a culprit is progress (a config was
used up), so only worlds that end before finishing or being blamed for any config (start-up
failures) count against `max_respawns`, and only in a row: after more than `max_respawns` such
worlds the group gives up and its queued configs are `not_run` with the reason
(`cpci.runner.parent.group_queue`). An error of the scheduler itself while it runs a world ends that
world the same way: the records already sent stand, and only what it took without a record goes
back to the queue (or is `not_run`, once the group gives up).

A config that failed is then rerun, isolated and its polluter bisected, and a passing new config
given its arrival runs, as `cpci.runner.parent.attempts` says, each attempt in a fresh world of its
own with a fixed list of configs; these are taken once no queue has configs. Every attempt goes out
through the outbox (`cpci.runner.parent.outbox`), which lets nothing of a config pass after its
final record.

Worlds are started through the `StartWorld` the scheduler is given
(`cpci.runner.parent.world`): the session's launches them, a test scripts them.

A worker thread that cannot even settle a config (its `not_run` record fails to be sent)
ends, keeping the traceback in `error`; once every thread has ended (`finished`), the session
reports each config it never got as `not_run`, so pytest never waits for a record that cannot
come.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from cpci.evidence import RERUN_OUTCOMES
from cpci.runner.parent.attempt_records import (
    AttemptRecord,
    Where,
    of_agreed,
    of_ended_world,
    of_not_run,
)
from cpci.runner.parent.attempts import Attempt, settle
from cpci.runner.parent.group_queue import GroupQueue
from cpci.runner.parent.outbox import Outbox, RecordSink
from cpci.runner.parent.planning import ConfigSpec, Group
from cpci.runner.parent.progress import InFlight, RunStats
from cpci.runner.parent.rerun_policy import RerunPolicy
from cpci.runner.parent.slots import Slots
from cpci.runner.parent.world import StartWorld, Take, World, WorldFailure, WorldResult
from cpci.runner.wire.protocol import AgreedRecord
from cpci.schema import BatchInfo

__all__ = ["Scheduler"]


@dataclass(frozen=True)
class _Rerun:
    group: Group
    first: Attempt


@dataclass
class _Fed:
    """What one pool world took from its queue (for the cap, and for a scheduler error), and
    what the group gave up when the world ended (once the queue took its end into account)."""

    taken: list[int] = field(default_factory=list)
    given_up: list[int] | None = None


class Scheduler:
    """Runs every group's configs on background threads and sends each record to `sink`."""

    def __init__(
        self,
        groups: list[Group],
        *,
        start_world: StartWorld,
        slots: Slots,
        workers: int,
        world_cap: int | None,
        max_respawns: int,
        policy: RerunPolicy,
        sink: RecordSink,
        stats: RunStats,
        ended: Callable[[], None] = lambda: None,
    ) -> None:
        self._queues = [GroupQueue.of(g) for g in groups if g.configs]
        self._index = {c.nodeid: i for g in groups for i, c in enumerate(g.configs)}  # plan index
        self._reruns: deque[_Rerun] = deque()
        self._start_world = start_world
        self._slots = slots
        self._workers = workers
        self._world_cap = world_cap
        self._max_respawns = max_respawns
        self._policy = policy
        self._outbox = Outbox(sink)
        self._ended = ended  # called as each worker thread ends
        self._stats = stats
        #: What ended a worker thread, when settling a config failed: its traceback.
        self.error: str | None = None
        self._working = 0  # worker threads not yet ended
        self._threads: list[threading.Thread] = []
        self._live: set[World] = set()
        self._busy = 0  # jobs running: their worlds may yet give back configs or ask for reruns
        self._lock = threading.Condition()
        self._stopping = threading.Event()
        self._names = 0

    def in_flight(self) -> list[InFlight]:
        """The config each running world is running now."""
        with self._lock:
            worlds = list(self._live)
        return [flight for world in worlds if (flight := world.in_flight) is not None]

    def start(self) -> None:
        self._working = self._workers
        for n in range(self._workers):
            thread = threading.Thread(target=self._work, name=f"cpci-scheduler-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, *, grace_s: float = 0.0) -> None:
        """End the run: with `grace_s` (every config was reported, so the worlds left are only
        closing), first let them end on their own for up to that long, so their ranks' exit
        handlers run (coverage data, a library's own clean-up); then kill every world still
        running (at once when the session is cut short, e.g. on Ctrl-C or -x)."""
        deadline = time.monotonic() + grace_s
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        self._stopping.set()
        with self._lock:
            live = list(self._live)
            self._lock.notify_all()
        for world in live:
            world.kill()
        for thread in self._threads:
            thread.join(timeout=30)

    # -- the workers' loop ---------------------------------------------------------------------
    def _work(self) -> None:
        try:
            while (job := self._next_job()) is not None:
                try:
                    if isinstance(job, GroupQueue):
                        self._run_pool_world(job)
                    else:
                        self._rerun(job.group, job.first)
                finally:
                    with self._lock:
                        self._busy -= 1
                        self._lock.notify_all()
        except Exception:  # even settling a config failed (its record could not be sent)
            with self._lock:
                self.error = self.error or traceback.format_exc()
        finally:
            with self._lock:
                self._working -= 1
            self._ended()

    def finished(self) -> bool:
        """Whether every worker thread has ended: no record comes after this."""
        with self._lock:
            return self._working == 0

    def _next_job(self) -> GroupQueue | _Rerun | None:
        """A queue to start a world for (the one with fewest live worlds first), else a rerun;
        waits while running jobs may still produce work; None when all is done."""
        with self._lock:
            while not self._stopping.is_set():
                waiting = [q for q in self._queues if q.queued]
                job: GroupQueue | _Rerun
                if waiting:
                    job = queue = min(waiting, key=lambda q: q.live)
                    queue.live += 1
                elif self._reruns:
                    job = self._reruns.popleft()
                elif self._busy:
                    self._lock.wait()
                    continue
                else:
                    return None
                self._busy += 1
                return job
            return None

    # -- pool worlds ---------------------------------------------------------------------------
    def _run_pool_world(self, queue: GroupQueue) -> None:
        fed = _Fed()
        try:
            self._feed_one_world(queue, fed)
        except Exception as exc:  # never leave pytest waiting for a result that cannot come
            self._after_error(queue, fed, f"cpci scheduler error: {exc!r}")
        finally:
            with self._lock:
                queue.live -= 1

    def _after_error(self, queue: GroupQueue, fed: _Fed, why: str) -> None:
        """A scheduler error ended a pool world: it ends like a world that died without a culprit.

        Configs with a record keep it (a rerun it queued still runs); those the world took without
        one go back to the front of the queue; only when the group gives up (more than
        `max_respawns` worlds in a row ended without a record) are they and the queue `not_run`.
        """
        group = queue.group
        with self._lock:
            if fed.given_up is None:  # the queue has not taken this world's end into account
                recorded = {
                    i for i in fed.taken if self._outbox.latest(group.configs[i].nodeid) is not None
                }
                back = [i for i in fed.taken if i not in recorded and i not in queue.queued]
                failure = WorldFailure("crashed", None, 0.0, [], why)
                ended = WorldResult(None, 0.0, recorded, failure, fed=back)
                fed.given_up = queue.world_ended(ended, self._max_respawns)
            stranded, fruitless = fed.given_up, queue.fruitless
            self._lock.notify_all()
        if stranded:
            self._give_up(group, stranded, _give_up_reason(fruitless, self._max_respawns, why))

    def _feed_one_world(self, queue: GroupQueue, fed: _Fed) -> None:
        group = queue.group
        env, release = self._slots.acquire(group.world_size)
        try:
            with self._lock:  # the slot may have taken a while: is there still work?
                first = None if self._stopping.is_set() else queue.take()
                if first is None:
                    return
                fed.taken.append(first)  # taken now, so no world starts for nothing
                world_no = queue.number_world()

            head = [first]

            def take() -> int | None:
                if head:
                    return head.pop()
                with self._lock:
                    full = self._world_cap is not None and len(fed.taken) >= self._world_cap
                    index = None if full or self._stopping.is_set() else queue.take()
                    if index is not None:
                        fed.taken.append(index)
                    return index

            world = self._new_world(group, env, take)
            result, _ = self._watch(world, group, world_no, attempt=1, first_pass=True)
        finally:
            release()
        self._after_pool_world(queue, fed, world, world_no, result)

    def _after_pool_world(
        self, queue: GroupQueue, fed: _Fed, world: World, world_no: int, result: WorldResult
    ) -> None:
        group = queue.group
        failure = result.failure
        if failure is not None and failure.culprit is not None:
            self._ended_world(group, world, world_no, 1, failure.culprit, failure)
        with self._lock:
            stranded = fed.given_up = queue.world_ended(result, self._max_respawns)
            fruitless, requeued = queue.fruitless, bool(queue.queued)
            self._lock.notify_all()
        if failure is None:
            return
        if stranded:
            # Like those before it, its last world ended before finishing or being blamed for a
            # config: a rank died or hung before the first config was done, a start-up failure.
            why = f"world start-up failed: {failure.reason}"
            message = _give_up_reason(fruitless, self._max_respawns, why)
            detail = "\n".join(e.detail or e.message for e in failure.errors)
            for index in stranded:
                self._not_run(
                    group, group.configs[index], world_no, 1, message, detail, first_pass=True
                )
        elif requeued:
            self._stats.respawned()  # a fresh world takes the rest of the queue

    # -- one world, however it is fed -----------------------------------------------------------
    def _new_world(self, group: Group, env: dict[str, str], take: Take) -> World:
        with self._lock:
            self._names += 1
            name = f"world-{self._names:04d}-g{group.index}"
            world = self._start_world(name, group, take, env)
            self._live.add(world)
        return world

    def _watch(
        self, world: World, group: Group, world_no: int, *, attempt: int, first_pass: bool
    ) -> tuple[WorldResult, dict[str, Attempt]]:
        """Run `world`, settling each config as its ranks agree on it; its agreed attempts.

        A first pass (`first_pass`: a pool world) sends each attempt at once; a rerun's world
        only returns them, for `settle` to decide what each means."""
        attempts: dict[str, Attempt] = {}

        def on_outcome(spec: ConfigSpec, agreed: AgreedRecord) -> None:
            where = _where(group, world_no, attempt, world.started_s)
            ran = self._attempt(of_agreed(spec, agreed, where), world, group, agreed.index)
            attempts[spec.nodeid] = self._settled(group, ran, first_pass)
            self._stats.config_ran(agreed.duration_s)

        if self._stopping.is_set():
            with self._lock:
                self._live.discard(world)
            return WorldResult(None, 0.0, set(), None), attempts
        self._stats.world_started()
        try:
            result = world.run(on_outcome)
        finally:
            with self._lock:
                self._live.discard(world)
            self._stats.world_ended(world.started_s)  # however it ended (a scheduler error too)
        return result, attempts

    def _attempt(self, ran: AttemptRecord, world: World, group: Group, index: int) -> Attempt:
        """An attempt, shared if its world was fed others, with the configs its world ran before
        it when a rerun may replay them (kept for failures to rerun only: a world may run
        thousands, and a passing new config's arrival runs replay none)."""
        shared = len(world.fed) > 1
        failed = ran.result.outcome in RERUN_OUTCOMES
        if not failed or not self._policy.wants_rerun(ran.result, shared):
            return Attempt(ran, [], shared)
        before = world.fed[: world.fed.index(index)]
        return Attempt(ran, [group.configs[i] for i in before], shared)

    def _settled(self, group: Group, ran: Attempt, first_pass: bool) -> Attempt:
        """Send a first-pass result at once: final, unless it is to be rerun."""
        if first_pass:
            result = ran.record.result
            rerun = self._policy.wants_rerun(result, ran.shared)
            stop = None if rerun else self._policy.stop_at_once(result)
            if stop is not None:  # a failure whose first attempt settles it: say why
                result = result.model_copy(update={"stop_reason": stop.why})
            self._outbox.send(replace(ran.record, result=result, final=not rerun))
            if stop is not None and stop.kind == "decided":
                self._stats.decided(result.nodeid, 1)
            if rerun:
                with self._lock:
                    self._reruns.append(_Rerun(group, ran))
                    self._lock.notify_all()
        return ran

    def _ended_world(
        self,
        group: Group,
        world: World,
        world_no: int,
        attempt: int,
        culprit: int,
        failure: WorldFailure,
        first_pass: bool = True,
    ) -> Attempt:
        """The config in flight when its world crashed, hung, or was ended after one rank failed a
        torch harness test: it ran, and it is to blame."""
        spec = group.configs[culprit]
        self._stats.ended_on(spec.nodeid, failure.kind, failure.culprit_s, first=first_pass)
        where = _where(group, world_no, attempt, world.started_s)
        ended = of_ended_world(spec, failure, where)
        return self._settled(group, self._attempt(ended, world, group, culprit), first_pass)

    def _not_run(
        self,
        group: Group,
        spec: ConfigSpec,
        world_no: int,
        attempt: int,
        why: str,
        detail: str,
        first_pass: bool,
    ) -> Attempt:
        """A config that never began: red, but no evidence about its code."""
        never = of_not_run(spec, why, detail, _where(group, world_no, attempt))
        return self._settled(group, Attempt(never, [], shared=False), first_pass)

    def _give_up(self, group: Group, indices: list[int], why: str) -> None:
        """After a scheduler error: settle each of these configs not yet settled."""
        for index in indices:
            spec = group.configs[index]
            if self._outbox.settled(spec.nodeid):
                continue
            last = self._outbox.latest(spec.nodeid)
            if last is not None:  # it ran; its reruns did not finish, its last attempt stands
                stands = replace(last, final=True, recorded=True, note=f"reruns stopped: {why}")
                self._outbox.send(stands)
            else:
                self._not_run(group, spec, 0, 1, why, "", first_pass=True)  # alone: final at once

    # -- reruns --------------------------------------------------------------------------------
    def _rerun(self, group: Group, first: Attempt) -> None:
        spec = first.record.spec
        if self._outbox.settled(spec.nodeid):  # settled meanwhile, by a scheduler error
            return

        def run(specs: list[ConfigSpec], attempt: int) -> AttemptRecord | None:
            return self._run_alone(group, specs, attempt).get(spec.nodeid)

        try:
            settled = settle(first, self._policy, run, self._outbox.send)
        except Exception as exc:  # never leave pytest waiting for a result that cannot come
            self._give_up(group, [self._index[spec.nodeid]], f"cpci scheduler error: {exc!r}")
            return
        final = settled.record
        self._stats.rerun_settled(final.result)
        if settled.decided:
            self._stats.decided(spec.nodeid, final.result.attempt)
        self._outbox.send(final)

    def _run_alone(
        self, group: Group, specs: list[ConfigSpec], attempt: int
    ) -> dict[str, AttemptRecord]:
        """Run exactly `specs`, in order, in one fresh world (a rerun or an isolation replay).

        Nothing is sent: the caller decides what each attempt means. A config the world never
        began is `not_run`, with why; none at all when the session is ending.
        """
        order: Iterator[int] = iter([self._index[s.nodeid] for s in specs])
        queue = next(q for q in self._queues if q.group is group)
        env, release = self._slots.acquire(group.world_size)
        try:
            with self._lock:
                world_no = queue.number_world()
            world = self._new_world(group, env, lambda: next(order, None))
            result, agreed = self._watch(world, group, world_no, attempt=attempt, first_pass=False)
        finally:
            release()
        ran = {nodeid: a.record for nodeid, a in agreed.items()}
        failure = result.failure
        if self._stopping.is_set() and failure is not None:
            return ran
        if failure is not None and failure.culprit is not None:
            ended = self._ended_world(
                group, world, world_no, attempt, failure.culprit, failure, first_pass=False
            )
            ran[ended.record.spec.nodeid] = ended.record
        for spec in specs:
            if spec.nodeid not in ran:
                why = _alone_reason(failure)
                ran[spec.nodeid] = self._not_run(
                    group, spec, world_no, attempt, *why, first_pass=False
                ).record
        return ran


def _where(group: Group, world_no: int, attempt: int, start_s: float | None = None) -> Where:
    """Where an attempt ran: its group and that group's world (the results' `batch`)."""
    placed = BatchInfo(index=group.index, world=world_no, size=len(group.configs), start_s=start_s)
    return Where(attempt=attempt, backend=group.backend, batch=placed)


def _give_up_reason(fruitless: int, max_respawns: int, why: str) -> str:
    """The message of the configs left when a group gives up after `fruitless` worlds in a row
    ended without running a config, the last one because of `why`."""
    worlds = "its world" if fruitless == 1 else f"{fruitless} worlds in a row"
    return (
        f"{why} ({worlds} ended without running a config; "
        f"--cpci-max-respawns {max_respawns}: the group gave up)"
    )


def _alone_reason(failure: WorldFailure | None) -> tuple[str, str]:
    if failure is None:
        return "the world ended before running this config", ""
    detail = "\n".join(e.detail or e.message for e in failure.errors)
    return f"its world ended before running it: {failure.reason}", detail
