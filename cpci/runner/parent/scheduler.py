"""Running configs: a pool of long-lived worlds fed from one queue per group, and reruns.

Each group (the configs of one world size and backend, `cpci.runner.parent.planning.Group`) is a
queue. Worker threads (`--cpci-workers`) each start a world for a group that has configs queued and
feed it from that queue until the queue is empty or the world has taken `cap` configs
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

A config that failed is then rerun or isolated as `cpci.runner.parent.attempts` says, each attempt
in a fresh world of its own with a fixed list of configs; reruns are taken once no queue has
configs.

A worker thread that cannot even settle a config (its `not_run` record fails to be delivered)
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

from cpci.runner.parent.attempt_records import (
    Delivery,
    Where,
    of_agreed,
    of_ended_world,
    of_not_run,
)
from cpci.runner.parent.attempts import Attempt, settle
from cpci.runner.parent.group_queue import GroupQueue
from cpci.runner.parent.launched_world import Take, World, WorldFailure, WorldLaunch, WorldResult
from cpci.runner.parent.planning import ConfigSpec, Group
from cpci.runner.parent.progress import InFlight, RunStats
from cpci.runner.parent.rerun_policy import RerunPolicy
from cpci.runner.parent.slots import Slots
from cpci.runner.wire.protocol import AgreedRecord
from cpci.schema import BatchInfo

__all__ = ["Deliver", "Scheduler"]

Deliver = Callable[[Delivery], None]


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
    """Runs every group's configs on background threads and hands each record to `deliver`."""

    def __init__(
        self,
        groups: list[Group],
        *,
        launch: WorldLaunch,
        slots: Slots,
        workers: int,
        cap: int | None,
        max_respawns: int,
        policy: RerunPolicy,
        deliver: Deliver,
        stats: RunStats,
        ended: Callable[[], None] = lambda: None,
    ) -> None:
        self._queues = [GroupQueue.of(g) for g in groups if g.configs]
        self._index = {c.nodeid: i for g in groups for i, c in enumerate(g.configs)}  # plan index
        self._reruns: deque[_Rerun] = deque()
        self._launch = launch
        self._slots = slots
        self._workers = workers
        self._cap = cap
        self._max_respawns = max_respawns
        self._policy = policy
        self._deliver = deliver
        self._ended = ended  # called as each worker thread ends
        self.stats = stats
        #: What ended a worker thread, when settling a config failed: its traceback.
        self.error: str | None = None
        self._working = 0  # worker threads not yet ended
        self._threads: list[threading.Thread] = []
        self._live: set[World] = set()
        self._busy = 0  # jobs running: their worlds may yet give back configs or ask for reruns
        self._lock = threading.Condition()
        self._stopping = threading.Event()
        self._reported: set[str] = set()  # node ids whose final record went out
        self._last: dict[str, Delivery] = {}  # node id -> its latest record sent
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
        except Exception:  # even settling a config failed (its record could not be delivered)
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
                recorded = {i for i in fed.taken if group.configs[i].nodeid in self._last}
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
                    full = self._cap is not None and len(fed.taken) >= self._cap
                    index = None if full or self._stopping.is_set() else queue.take()
                    if index is not None:
                        fed.taken.append(index)
                    return index

            world = self._new_world(group, env, take)
            result, _ = self._watch(world, group, world_no, attempt=1, log=True)
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
                self._not_run(group, group.configs[index], world_no, 1, message, detail, log=True)
        elif requeued:
            with self.stats.lock:
                self.stats.respawns += 1  # a fresh world takes the rest of the queue

    # -- one world, however it is fed -----------------------------------------------------------
    def _new_world(self, group: Group, env: dict[str, str], take: Take) -> World:
        with self._lock:
            self._names += 1
            name = f"world-{self._names:04d}-g{group.index}"
            launch = replace(self._launch, env={**self._launch.env, **env})
            world = World(launch, name, group, take)
            self._live.add(world)
        return world

    def _watch(
        self, world: World, group: Group, world_no: int, *, attempt: int, log: bool
    ) -> tuple[WorldResult, dict[str, Attempt]]:
        """Run `world`, settling each config as its ranks agree on it; its agreed attempts."""
        attempts: dict[str, Attempt] = {}

        def on_outcome(spec: ConfigSpec, agreed: AgreedRecord) -> None:
            where = _where(group, world_no, attempt, world.started_s)
            ran = self._attempt(of_agreed(spec, agreed, where), world, agreed.index)
            attempts[spec.nodeid] = self._settled(group, ran, log)
            with self.stats.lock:
                self.stats.test_s += agreed.duration_s

        if self._stopping.is_set():
            with self._lock:
                self._live.discard(world)
            return WorldResult(None, 0.0, set(), None), attempts
        with self.stats.lock:
            self.stats.running += 1
        try:
            result = world.run(on_outcome)
        finally:
            with self._lock:
                self._live.discard(world)
            with self.stats.lock:  # counted however it ended (a scheduler error included)
                self.stats.running -= 1
                self.stats.worlds += 1
                self.stats.init_s += world.started_s or 0.0
        return result, attempts

    def _attempt(self, ran: Delivery, world: World, index: int) -> Attempt:
        """An attempt, shared if its world was fed others, with the configs its world ran before
        it when a rerun may replay them (kept for failures only: a world may run thousands)."""
        shared = len(world.fed) > 1
        if not self._policy.wants_rerun(ran.record, shared):
            return Attempt(ran, [], shared)
        before = world.fed[: world.fed.index(index)]
        return Attempt(ran, [world.configs[i] for i in before], shared)

    def _settled(self, group: Group, ran: Attempt, log: bool) -> Attempt:
        """Report a first-pass result at once: final, unless it is to be rerun."""
        if log:
            rerun = self._policy.wants_rerun(ran.delivery.record, ran.shared)
            self._send(replace(ran.delivery, final=not rerun))
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
        log: bool = True,
    ) -> Attempt:
        """The config in flight when its world crashed, hung, or was ended after one rank failed a
        torch harness test: it ran, and it is to blame."""
        spec = group.configs[culprit]
        with self.stats.lock:
            self.stats.test_s += failure.culprit_s
            if failure.kind == "timeout":
                self.stats.timeouts += 1
                self.stats.timeout_s += failure.culprit_s
            if log and failure.kind == "crashed":
                self.stats.crashed.append(spec.nodeid)
            elif log and failure.kind == "timeout":
                self.stats.timed_out.append(spec.nodeid)
        where = _where(group, world_no, attempt, world.started_s)
        ended = of_ended_world(spec, failure, where)
        return self._settled(group, self._attempt(ended, world, culprit), log)

    def _not_run(
        self,
        group: Group,
        spec: ConfigSpec,
        world_no: int,
        attempt: int,
        why: str,
        detail: str,
        log: bool,
    ) -> Attempt:
        """A config that never began: red, but no evidence about its code."""
        never = of_not_run(spec, why, detail, _where(group, world_no, attempt))
        return self._settled(group, Attempt(never, [], shared=False), log)

    def _give_up(self, group: Group, indices: list[int], why: str) -> None:
        """After a scheduler error: settle each of these configs not yet reported."""
        for index in indices:
            spec = group.configs[index]
            with self._lock:
                if spec.nodeid in self._reported:
                    continue
                last = self._last.get(spec.nodeid)
            if last is not None:  # it ran; its reruns did not finish, its last attempt stands
                self._send(replace(last, final=True, recorded=True, note=f"reruns stopped: {why}"))
            else:
                self._not_run(group, spec, 0, 1, why, "", log=True)  # alone: final at once

    def _send(self, sent: Delivery) -> None:
        """Hand a record on; once a config's final record went out, nothing more of it does (a
        scheduler error settles a config whose rerun is still queued, and the rerun may yet
        run: pytest and the results file get one verdict per config). A record `deliver` fails
        on was not sent: its config is left as it was, for the scheduler error to requeue."""
        nodeid = sent.spec.nodeid
        with self._lock:
            if nodeid in self._reported:
                return
            before = self._last.get(nodeid)
            self._last[nodeid] = sent
            if sent.final:
                self._reported.add(nodeid)
        try:
            self._deliver(sent)
        except BaseException:
            with self._lock:
                self._reported.discard(nodeid)
                if before is None:
                    del self._last[nodeid]
                else:
                    self._last[nodeid] = before
            raise

    # -- reruns --------------------------------------------------------------------------------
    def _rerun(self, group: Group, first: Attempt) -> None:
        spec = first.delivery.spec
        with self._lock:
            if spec.nodeid in self._reported:  # settled meanwhile, by a scheduler error
                return

        def run(specs: list[ConfigSpec], attempt: int) -> Delivery | None:
            return self._run_alone(group, specs, attempt).get(spec.nodeid)

        try:
            final = settle(first, self._policy, run, self._send)
        except Exception as exc:  # never leave pytest waiting for a result that cannot come
            self._give_up(group, [self._index[spec.nodeid]], f"cpci scheduler error: {exc!r}")
            return
        record = final.record
        with self.stats.lock:
            if record.isolation == "order-dependent":
                self.stats.order_dependent.append(spec.nodeid)
            elif record.flaky:
                self.stats.flaky.append(spec.nodeid)
        self._send(final)

    def _run_alone(
        self, group: Group, specs: list[ConfigSpec], attempt: int
    ) -> dict[str, Delivery]:
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
            result, agreed = self._watch(world, group, world_no, attempt=attempt, log=False)
        finally:
            release()
        ran = {nodeid: a.delivery for nodeid, a in agreed.items()}
        failure = result.failure
        if self._stopping.is_set() and failure is not None:
            return ran
        if failure is not None and failure.culprit is not None:
            ended = self._ended_world(
                group, world, world_no, attempt, failure.culprit, failure, log=False
            )
            ran[ended.delivery.spec.nodeid] = ended.delivery
        for spec in specs:
            if spec.nodeid not in ran:
                why = _alone_reason(failure)
                ran[spec.nodeid] = self._not_run(
                    group, spec, world_no, attempt, *why, log=False
                ).delivery
        return ran


def _where(group: Group, world_no: int, attempt: int, start_s: float | None = None) -> Where:
    info = BatchInfo(index=group.index, world=world_no, size=len(group.configs), start_s=start_s)
    return Where(attempt=attempt, backend=group.backend, batch=info)


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
