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

from cpci.runner.attempts import Attempt, Delivery, RerunPolicy, settle
from cpci.runner.planning import Batch, ConfigSpec
from cpci.runner.progress import RunStats
from cpci.runner.rank_errors import world_note
from cpci.runner.world import AgreedOutcome, World, WorldFailure, WorldLaunch, WorldResult
from cpci.schema import BatchInfo, ResultRecord

__all__ = ["Deliver", "Delivery", "Scheduler", "Slots"]

Deliver = Callable[[Delivery], None]


class Slots:
    """Devices for worlds that run at once: GPU indices, or CPU cores when there are no GPUs."""

    def __init__(self, gpus: int, cores: int) -> None:
        self._gpus = list(range(gpus))
        self._free_gpus = list(self._gpus)
        self._cores = max(1, cores)
        self._free_cores = self._cores
        self._cond = threading.Condition()

    def acquire(self, world_size: int) -> tuple[dict[str, str], Callable[[], None]]:
        """Block until the world fits; returns its extra env and the function that frees it."""
        with self._cond:
            if self._gpus:
                if world_size > len(self._gpus):
                    raise ValueError(
                        f"a world of {world_size} ranks needs {world_size} GPUs, "
                        f"{len(self._gpus)} are visible"
                    )
                self._cond.wait_for(lambda: len(self._free_gpus) >= world_size)
                taken = self._free_gpus[:world_size]
                del self._free_gpus[:world_size]
                env = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, taken))}
                return env, lambda: self._release(gpus=taken)
            need = min(world_size, self._cores)
            self._cond.wait_for(lambda: self._free_cores >= need)
            self._free_cores -= need
            return {}, lambda: self._release(cores=need)

    def _release(self, gpus: list[int] | None = None, cores: int = 0) -> None:
        with self._cond:
            self._free_gpus.extend(gpus or [])
            self._free_gpus.sort()
            self._free_cores += cores
            self._cond.notify_all()


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
        results = self._run_in_worlds(
            batch, list(batch.configs), attempt=1, respawns=self._max_respawns
        )
        for ran in results.values():  # the rest were reported the moment they ended
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
        results: dict[str, Attempt] = {}
        remaining = list(specs)
        world_no = 0
        while remaining and not self._stopping.is_set():
            configs = {batch.configs.index(s): s for s in remaining}
            order = list(configs.values())
            result = self._run_world(batch, configs, world_no, attempt, order, results, log)
            remaining = [s for s in remaining if s.nodeid not in results]
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
                    results[spec.nodeid] = self._ended_world(
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
                    results[spec.nodeid] = self._not_run(batch, spec, world_no, attempt, *why, log)
                break
            world_no += 1
            with self.stats.lock:
                self.stats.respawns += 1
        return results

    def _run_world(
        self,
        batch: Batch,
        configs: dict[int, ConfigSpec],
        world_no: int,
        attempt: int,
        order: list[ConfigSpec],
        results: dict[str, Attempt],
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

        def on_outcome(spec: ConfigSpec, agreed: AgreedOutcome) -> None:
            record = ResultRecord(
                nodeid=spec.nodeid,
                world_size=spec.world_size,
                backend=agreed.backend,
                params=spec.params,
                outcome=agreed.outcome,
                duration_s=agreed.duration_s,
                rank_errors=agreed.rank_errors,
                attempt=attempt,
                metrics=agreed.metrics,
                batch=_batch_info(batch, world_no, world.started_s),
            )
            delivery = Delivery(spec, record, agreed.reports, final=False)
            results[spec.nodeid] = self._settled(_attempt(delivery, order), log)
            with self.stats.lock:
                self.stats.test_s += record.duration_s

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
        record = ResultRecord(
            nodeid=spec.nodeid,
            world_size=spec.world_size,
            backend=batch.backend,
            params=spec.params,
            outcome=failure.kind,
            duration_s=failure.culprit_s,
            rank_errors=failure.errors,
            attempt=attempt,
            batch=_batch_info(batch, world_no),
        )
        if log:
            with self.stats.lock:
                kind = self.stats.crashed if failure.kind == "crashed" else self.stats.timed_out
                kind.append(spec.nodeid)
        return self._settled(_attempt(Delivery(spec, record, None, final=False), order), log)

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
        message = f"not run: {why}"
        record = ResultRecord(
            nodeid=spec.nodeid,
            world_size=spec.world_size,
            backend=batch.backend,
            params=spec.params,
            outcome="not_run",
            duration_s=0.0,
            rank_errors=[world_note("world", message, f"{message}\n{detail}")],
            attempt=attempt,
            batch=_batch_info(batch, world_no),
        )
        delivery = Delivery(spec, record, None, final=False)
        return self._settled(Attempt(delivery, [], shared=False), log)

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

    def _send(self, delivery: Delivery) -> None:
        with self._lock:
            self._last[delivery.spec.nodeid] = delivery
            if delivery.final:
                self._reported.add(delivery.spec.nodeid)
        self._deliver(delivery)

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


def _attempt(delivery: Delivery, order: list[ConfigSpec]) -> Attempt:
    spec = delivery.spec
    return Attempt(delivery, order[: order.index(spec)], shared=len(order) > 1)


def _batch_info(batch: Batch, world_no: int, start_s: float | None = None) -> BatchInfo:
    return BatchInfo(index=batch.index, world=world_no, size=len(batch.configs), start_s=start_s)
