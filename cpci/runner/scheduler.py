"""Running batches: worlds in parallel on disjoint devices, respawns, and failure isolation.

A batch runs in one world. When that world dies or hangs, the config in flight is reported
(crashed or timeout) and the rest of the batch goes on in ONE fresh world, up to
`max_respawns` times. With `isolate_failures`, each config that failed in a shared world is
rerun alone: failing again means it is broken; passing alone and failing again after the same
predecessors means it is order-dependent; otherwise it is flaky.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from cpci.runner.planning import Batch, ConfigSpec
from cpci.runner.progress import RunStats
from cpci.runner.world import World, WorldFailure, WorldLaunch, WorldResult
from cpci.schema import FAILING_OUTCOMES, BatchInfo, Outcome, RankError, ResultRecord


@dataclass(frozen=True)
class Delivery:
    """A config's record; `final` is the one pytest reports (earlier attempts only get logged)."""

    spec: ConfigSpec
    record: ResultRecord
    reports: list[dict[str, Any]] | None  # serialized pytest reports, None for crash/timeout
    final: bool
    note: str | None = None


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
        isolate_failures: bool,
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
        self._isolate = isolate_failures
        self._deliver = deliver
        self.stats = stats
        self._threads: list[threading.Thread] = []
        self._live: set[World] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._reported: set[str] = set()  # node ids whose final record went out
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
                for spec in batch.configs:
                    if spec.nodeid not in self._reported:
                        self._give_up(spec, batch, 0, f"cpci scheduler error: {exc!r}")

    def _run_batch(self, batch: Batch) -> None:
        results = self._run_in_worlds(
            batch, list(batch.configs), attempt=1, respawns=self._max_respawns
        )
        for ran in results.values():  # the rest were reported the moment they ended
            if self._needs_isolation(ran):
                self._isolate_one(batch, ran.delivery.spec, ran)

    def _needs_isolation(self, ran: _Ran) -> bool:
        return self._isolate and ran.shared and ran.delivery.record.outcome in FAILING_OUTCOMES

    def _settled(self, ran: _Ran, log: bool) -> _Ran:
        """Report a first-pass result at once: final, unless isolation will rerun it."""
        if log:
            final = not self._needs_isolation(ran)
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
    ) -> dict[str, _Ran]:
        """Run `specs` in order, in as few fresh worlds as crashes and hangs allow."""
        results: dict[str, _Ran] = {}
        remaining = list(specs)
        world_no = 0
        while remaining and not self._stopping.is_set():
            configs = {batch.configs.index(s): s for s in remaining}
            order = list(configs.values())
            result = self._run_world(batch, configs, world_no, attempt, order, results, log)
            remaining = [s for s in remaining if s.nodeid not in results]
            failure = result.failure
            if failure is None:
                for spec in remaining:
                    results[spec.nodeid] = self._failed(
                        batch,
                        spec,
                        world_no,
                        attempt,
                        order,
                        None,
                        log,
                        "the world ended without running this config",
                    )
                break
            if failure.culprit is not None:
                spec = configs[failure.culprit]
                results[spec.nodeid] = self._failed(
                    batch, spec, world_no, attempt, order, failure, log
                )
                remaining.remove(spec)
            never_ran = failure.culprit is None and not result.finished
            if never_ran or world_no >= respawns:
                why = (
                    "its world failed before running any config"
                    if never_ran
                    else f"the batch gave up after {respawns} respawn(s)"
                )
                for spec in remaining:
                    results[spec.nodeid] = self._failed(
                        batch, spec, world_no, attempt, order, failure, log, f"not run: {why}"
                    )
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
        results: dict[str, _Ran],
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

        def on_outcome(spec: ConfigSpec, raw: dict[str, Any]) -> None:
            record = ResultRecord(
                nodeid=spec.nodeid,
                world_size=spec.world_size,
                backend=raw.get("backend"),
                params=spec.params,
                outcome=raw["outcome"],
                duration_s=raw["duration_s"],
                rank_errors=[RankError.model_validate(e) for e in raw["rank_errors"]],
                attempt=attempt,
                metrics=raw["metrics"],
                batch=BatchInfo(
                    index=batch.index, world=world_no, size=len(batch.configs),
                    start_s=world.started_s,
                ),
            )  # fmt: skip
            delivery = Delivery(spec, record, raw["reports"], final=False)
            ran = _Ran(delivery, _before(order, spec), len(order) > 1)
            results[spec.nodeid] = self._settled(ran, log)
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

    def _failed(
        self,
        batch: Batch,
        spec: ConfigSpec,
        world_no: int,
        attempt: int,
        order: list[ConfigSpec],
        failure: WorldFailure | None,
        log: bool,
        why: str | None = None,
    ) -> _Ran:
        outcome: Outcome
        if why is None and failure is not None:  # the config in flight when the world ended
            outcome = failure.kind
            errors = failure.errors
        else:
            outcome = "error"
            errors = [RankError(rank=-1, phase="world", message=why or "not run", detail=why or "")]
            if failure is not None:
                errors += failure.errors
        record = ResultRecord(
            nodeid=spec.nodeid,
            world_size=spec.world_size,
            backend=batch.backend,
            params=spec.params,
            outcome=outcome,
            duration_s=failure.culprit_s if failure is not None and why is None else 0.0,
            rank_errors=errors,
            attempt=attempt,
            batch=BatchInfo(index=batch.index, world=world_no, size=len(batch.configs)),
        )
        with self.stats.lock:
            if outcome == "crashed":
                self.stats.crashed.append(spec.nodeid)
            elif outcome == "timeout":
                self.stats.timed_out.append(spec.nodeid)
        delivery = Delivery(spec, record, None, final=False)
        return self._settled(_Ran(delivery, _before(order, spec), len(order) > 1), log)

    def _give_up(self, spec: ConfigSpec, batch: Batch, world_no: int, why: str) -> None:
        self._failed(batch, spec, world_no, 1, [spec], None, True, why)  # alone: final at once

    def _send(self, delivery: Delivery) -> None:
        if delivery.final:
            with self._lock:
                self._reported.add(delivery.spec.nodeid)
        self._deliver(delivery)

    def _isolate_one(self, batch: Batch, spec: ConfigSpec, first: _Ran) -> None:
        alone = self._run_in_worlds(batch, [spec], attempt=2, respawns=0, log=False)[spec.nodeid]
        if alone.delivery.record.outcome in FAILING_OUTCOMES:
            self._finish(alone.delivery, "fails-alone", "failed in a shared world and again alone")
            return
        if first.before:
            replay = self._run_in_worlds(
                batch, [*first.before, spec], attempt=3, respawns=0, log=False
            )
            again = replay.get(spec.nodeid)
            if again is not None and again.delivery.record.outcome in FAILING_OUTCOMES:
                names = ", ".join(s.nodeid for s in first.before)
                note = (
                    f"ORDER-DEPENDENT: passes alone, but fails again after the configs that ran "
                    f"before it in its world: {names}"
                )
                self._send(alone.delivery)
                self._finish(again.delivery, "order-dependent", note)
                with self.stats.lock:
                    self.stats.order_dependent.append(spec.nodeid)
                return
        self._finish(alone.delivery, "flaky", "FLAKY: failed in a shared world, passed when rerun")
        with self.stats.lock:
            self.stats.flaky.append(spec.nodeid)

    def _finish(self, delivery: Delivery, isolation: str, note: str) -> None:
        flaky = isolation == "flaky"
        record = delivery.record.model_copy(update={"isolation": isolation, "flaky": flaky})
        self._send(replace(delivery, record=record, final=True, note=note))


@dataclass(frozen=True)
class _Ran:
    delivery: Delivery
    before: list[ConfigSpec]  # configs that ran before it in its world
    shared: bool  # its world ran more than one config


def _before(order: list[ConfigSpec], spec: ConfigSpec) -> list[ConfigSpec]:
    return order[: order.index(spec)]
