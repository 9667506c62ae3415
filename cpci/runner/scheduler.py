"""Running batches: worlds in parallel on disjoint devices, respawns, and never-ran configs.

A batch runs in one world. When that world dies or hangs, the config in flight is reported
(crashed or timeout: it ran) and the rest of the batch goes on in ONE fresh world, up to
`max_respawns` times. Configs that never began are `not_run`, with the reason: their world failed
to start, their batch gave up after its respawns, or the scheduler itself failed. A config that
failed is then rerun or isolated as `cpci.runner.attempts` says.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import replace

from cpci.runner.attempts import Attempt, settle
from cpci.runner.delivery import Delivery, Where, of_agreed, of_ended_world, of_not_run
from cpci.runner.planning import Batch, ConfigSpec
from cpci.runner.progress import RunStats
from cpci.runner.protocol import AgreedRecord
from cpci.runner.rerun_policy import RerunPolicy
from cpci.runner.slots import Slots
from cpci.runner.world import World, WorldFailure, WorldLaunch, WorldResult
from cpci.schema import BatchInfo

__all__ = ["Deliver", "Scheduler"]

Deliver = Callable[[Delivery], None]


class Scheduler:
    """Runs every batch on background threads and hands each record to `deliver`."""

    def __init__(
        self,
        batches: list[Batch],
        *,
        launch: WorldLaunch,
        slots: Slots,
        workers: int,
        max_respawns: int,
        policy: RerunPolicy,
        deliver: Deliver,
        stats: RunStats,
    ) -> None:
        self._queue: queue.Queue[Batch] = queue.Queue()
        for batch in batches:
            self._queue.put(batch)
        self._launch = launch
        self._slots = slots
        self._workers = workers
        self._max_respawns = max_respawns
        self._policy = policy
        self._deliver = deliver
        self.stats = stats
        self._threads: list[threading.Thread] = []
        self._live: set[World] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._reported: set[str] = set()  # node ids whose final record went out
        self._last: dict[str, Delivery] = {}  # node id -> its latest record sent
        self._names = 0

    def start(self) -> None:
        for n in range(self._workers):
            thread = threading.Thread(target=self._work, name=f"cpci-scheduler-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Kill every running world (the session is ending, e.g. on Ctrl-C or -x)."""
        self._stopping.set()
        with self._lock:
            live = list(self._live)
        for world in live:
            world.kill()
        for thread in self._threads:
            thread.join(timeout=30)

    def _work(self) -> None:
        while not self._stopping.is_set():
            try:
                batch = self._queue.get_nowait()
            except queue.Empty:
                return
            try:
                self._run_batch(batch)
            except Exception as exc:  # never leave pytest waiting for a result that cannot come
                self._give_up(batch, f"cpci scheduler error: {exc!r}")

    def _run_batch(self, batch: Batch) -> None:
        firsts = self._run_in_worlds(
            batch, list(batch.configs), attempt=1, respawns=self._max_respawns
        )
        for ran in firsts.values():  # the rest were reported the moment they ended
            if self._policy.wants_rerun(ran.delivery.record, ran.shared):
                self._rerun(batch, ran)

    def _settled(self, ran: Attempt, log: bool) -> Attempt:
        """Report a first-pass result at once: final, unless it is to be rerun."""
        if log:
            final = not self._policy.wants_rerun(ran.delivery.record, ran.shared)
            self._send(replace(ran.delivery, final=final))
        return ran

    def _run_in_worlds(
        self,
        batch: Batch,
        specs: list[ConfigSpec],
        *,
        attempt: int,
        respawns: int,
        log: bool = True,
    ) -> dict[str, Attempt]:
        """Run `specs` in order, in as few fresh worlds as crashes and hangs allow."""
        attempts: dict[str, Attempt] = {}
        remaining = list(specs)
        world_no = 0
        while remaining and not self._stopping.is_set():
            configs = {batch.configs.index(s): s for s in remaining}
            order = list(configs.values())
            result = self._run_world(batch, configs, world_no, attempt, order, attempts, log)
            remaining = [s for s in remaining if s.nodeid not in attempts]
            failure = result.failure
            why: tuple[str, str] | None = None  # (message, detail) for the configs never begun
            if failure is None:
                why = ("the world ended before running this config", "")
            elif failure.culprit is None and not result.finished:
                detail = "\n".join(e.detail or e.message for e in failure.errors)
                why = (f"world start-up failed: {failure.reason}", detail)
            else:
                if failure.culprit is not None:
                    spec = configs[failure.culprit]
                    attempts[spec.nodeid] = self._ended_world(
                        batch, spec, world_no, attempt, order, failure, log
                    )
                    remaining.remove(spec)
                if world_no >= respawns:
                    plural = "" if respawns == 1 else "s"
                    why = (
                        f"batch gave up after {respawns} respawn{plural}",
                        f"its last world ended: {failure.reason}",
                    )
            if why is not None:
                for spec in remaining:
                    attempts[spec.nodeid] = self._not_run(batch, spec, world_no, attempt, *why, log)
                break
            world_no += 1
            with self.stats.lock:
                self.stats.respawns += 1
        return attempts

    def _run_world(
        self,
        batch: Batch,
        configs: dict[int, ConfigSpec],
        world_no: int,
        attempt: int,
        order: list[ConfigSpec],
        attempts: dict[str, Attempt],
        log: bool,
    ) -> WorldResult:
        env, release = self._slots.acquire(batch.world_size)
        with self._lock:
            self._names += 1
            name = f"world-{self._names:04d}-b{batch.index}"
            launch = replace(self._launch, env={**self._launch.env, **env})
            world = World(launch, name, batch, configs)
            self._live.add(world)
        if self._stopping.is_set():
            release()
            return WorldResult(None, 0.0, set(), None)

        def on_outcome(spec: ConfigSpec, agreed: AgreedRecord) -> None:
            where = _where(batch, world_no, attempt, world.started_s)
            attempts[spec.nodeid] = self._settled(
                _attempt(of_agreed(spec, agreed, where), order), log
            )
            with self.stats.lock:
                self.stats.test_s += agreed.duration_s

        try:
            result = world.run(on_outcome)
        finally:
            release()
            with self._lock:
                self._live.discard(world)
        with self.stats.lock:
            self.stats.worlds += 1
            self.stats.init_s += result.started_s or 0.0
        return result

    def _ended_world(
        self,
        batch: Batch,
        spec: ConfigSpec,
        world_no: int,
        attempt: int,
        order: list[ConfigSpec],
        failure: WorldFailure,
        log: bool,
    ) -> Attempt:
        """The config in flight when its world crashed or hung: it ran, and it is to blame."""
        if log:
            with self.stats.lock:
                kind = self.stats.crashed if failure.kind == "crashed" else self.stats.timed_out
                kind.append(spec.nodeid)
        ended = of_ended_world(spec, failure, _where(batch, world_no, attempt))
        return self._settled(_attempt(ended, order), log)

    def _not_run(
        self,
        batch: Batch,
        spec: ConfigSpec,
        world_no: int,
        attempt: int,
        why: str,
        detail: str,
        log: bool,
    ) -> Attempt:
        """A config that never began: red, but no evidence about its code."""
        never = of_not_run(spec, why, detail, _where(batch, world_no, attempt))
        return self._settled(Attempt(never, [], shared=False), log)

    def _give_up(self, batch: Batch, why: str) -> None:
        """After a scheduler error: settle every config of the batch not yet reported."""
        for spec in batch.configs:
            with self._lock:
                if spec.nodeid in self._reported:
                    continue
                last = self._last.get(spec.nodeid)
            if last is not None:  # it ran; its reruns did not finish, its last attempt stands
                self._send(replace(last, final=True, recorded=True, note=f"reruns stopped: {why}"))
            else:
                self._not_run(batch, spec, 0, 1, why, "", log=True)  # alone: final at once

    def _send(self, sent: Delivery) -> None:
        with self._lock:
            self._last[sent.spec.nodeid] = sent
            if sent.final:
                self._reported.add(sent.spec.nodeid)
        self._deliver(sent)

    def _rerun(self, batch: Batch, first: Attempt) -> None:
        spec = first.delivery.spec

        def run(specs: list[ConfigSpec], attempt: int) -> Delivery | None:
            ran = self._run_in_worlds(batch, specs, attempt=attempt, respawns=0, log=False)
            got = ran.get(spec.nodeid)
            return None if got is None else got.delivery

        final = settle(first, self._policy, run, self._send)
        record = final.record
        with self.stats.lock:
            if record.isolation == "order-dependent":
                self.stats.order_dependent.append(spec.nodeid)
            elif record.flaky:
                self.stats.flaky.append(spec.nodeid)
        self._send(final)


def _attempt(ran: Delivery, order: list[ConfigSpec]) -> Attempt:
    return Attempt(ran, order[: order.index(ran.spec)], shared=len(order) > 1)


def _where(batch: Batch, world_no: int, attempt: int, start_s: float | None = None) -> Where:
    info = BatchInfo(index=batch.index, world=world_no, size=len(batch.configs), start_s=start_s)
    return Where(attempt=attempt, backend=batch.backend, batch=info)
