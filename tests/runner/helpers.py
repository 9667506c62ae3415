"""The runner tests' helpers, in one place: real pytest processes that launch worlds (and reading
what they wrote), and scripted worlds that run the scheduler in process, without torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

import pytest

from cpci.runner.parent.attempt_records import AttemptRecord
from cpci.runner.parent.outbox import RecordSink
from cpci.runner.parent.planning import ConfigSpec, Group
from cpci.runner.parent.progress import InFlight, RunStats
from cpci.runner.parent.rerun_policy import RerunPolicy
from cpci.runner.parent.scheduler import Scheduler
from cpci.runner.parent.slots import Slots
from cpci.runner.parent.world import OutcomeSink, Take, WorldFailure, WorldResult
from cpci.runner.wire.protocol import AgreedRecord
from cpci.runner.wire.rank_errors import rank_error


def results(path: Path) -> list[dict[str, Any]]:
    """The records of a results file, in the order they were written."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def by_nodeid(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The last record per node id (reruns come after first attempts)."""
    return {r["nodeid"]: r for r in records}


def worlds_started(stdout: str) -> int:
    """The number of worlds from the closing summary line."""
    for line in stdout.splitlines():
        if "world(s) started" in line:
            return int(line.split()[0])
    raise AssertionError(f"no cpci summary in output:\n{stdout}")


def run_pytest(
    path: Path,
    *args: str,
    env: dict[str, str] | None = None,
    unset: tuple[str, ...] = (),
    timeout: float = 300,
) -> pytest.RunResult:
    """Run pytest in `path` as a real subprocess (for module-scoped runs pytester cannot share),
    in this environment plus `env`, less the variables named in `unset`."""
    start = time.monotonic()
    environ = {k: v for k, v in os.environ.items() if k not in unset}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=path,
        env={**environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return pytest.RunResult(
        proc.returncode,
        proc.stdout.splitlines(),
        proc.stderr.splitlines(),
        time.monotonic() - start,
    )


#: Suite source (pasted into a written test file): rank 1 segfaults; rank 0, as NCCL's ranks do
#: after a peer died, waits for it to be gone, logs "remote process exited" and exits 1 itself.
#: The survivor's message is what must never be taken for the cause.
RANK1_SEGFAULTS = """
def rank1_segfaults_then_rank0_echoes(cpci_dist):
    import os, signal, sys, time
    import torch.distributed as dist

    pids = [None, None]
    dist.all_gather_object(pids, os.getpid())
    if cpci_dist.rank == 1:
        os.kill(os.getpid(), signal.SIGSEGV)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # rank 0 ends on its own, as NCCL's does
    while True:
        try:
            os.kill(pids[1], 0)
        except ProcessLookupError:
            break
        time.sleep(0.01)
    print("NCCL error: remote process exited or there was a network error", file=sys.stderr)
    sys.stderr.flush()
    os._exit(1)
"""


# -- scripted worlds: the scheduler in process, without torch ----------------------------------

#: What a scripted world does with one config: its ranks agree it passed or failed, the world
#: crashes or times out on it, or it hangs until the world is killed.
Step = Literal["passed", "failed", "crashed", "timeout", "hang"]


def specs(*names: str, world_size: int = 2) -> tuple[ConfigSpec, ...]:
    """Configs `t.py::NAME` of one world size."""
    return tuple(
        ConfigSpec(f"t.py::{n}", "t.py", world_size=world_size, backend="gloo", timeout=9.0)
        for n in names
    )


def group(*names: str, index: int = 0, world_size: int = 2) -> Group:
    return Group(index, world_size, "gloo", specs(*names, world_size=world_size))


class ScriptedWorld:
    """A world that runs what it is fed as its script says, in the caller's thread, at once.

    Like a launched world it takes `lookahead` configs ahead of the one it runs (what a dead world
    gives back), ends on the first crash or timeout (the config in flight to blame), and ends
    before any config when its start fails.
    """

    def __init__(
        self,
        script: Scripted,
        number: int,
        name: str,
        group: Group,
        take: Take,
        env: dict[str, str],
    ) -> None:
        self.number, self.name, self.group, self.env = number, name, group, env
        self.fed: list[int] = []
        self.started_s: float | None = None
        self.in_flight: InFlight | None = None
        self.killed = threading.Event()
        self.hanging = threading.Event()  # it is inside a config that hangs
        self._script = script
        self._take = take

    @property
    def names(self) -> list[str]:
        """The test names it was fed, in feed order."""
        return [self.group.configs[i].nodeid.split("::")[1] for i in self.fed]

    def _feed(self, upto: int) -> None:
        while len(self.fed) < upto and (index := self._take()) is not None:
            self.fed.append(index)

    def run(self, on_outcome: OutcomeSink) -> WorldResult:
        self._feed(1 + self._script.lookahead)
        if self.number in self._script.broken:
            error = rank_error(1, "world", "conftest refuses", "rank 1 exited with code 2")
            failure = WorldFailure("crashed", None, 0.0, [error], "rank 1 exited with code 2")
            return WorldResult(None, 0.1, set(), failure, fed=list(self.fed))
        self.started_s = 0.5
        finished: set[int] = set()
        position = 0
        while position < len(self.fed):
            index = self.fed[position]
            spec = self.group.configs[index]
            self._script.before.get(spec.nodeid.split("::")[1], lambda: None)()
            step = self._script.step(spec)
            if step == "hang":  # until killed: then its ranks are gone, as a crash
                self.hanging.set()
                self._script.changed()
                self.killed.wait(60)
                step = "crashed"
            if step in ("crashed", "timeout"):
                message = f"{spec.nodeid} ended its world ({step})"
                error = rank_error(1, "world", message, message)
                failure = WorldFailure(step, index, 0.25, [error], message)
                return WorldResult(self.started_s, 1.0, finished, failure, fed=list(self.fed))
            failed = [rank_error(1, "call", f"E   {spec.nodeid} failed")]
            agreed = AgreedRecord(
                index=index,
                outcome="passed" if step == "passed" else "failed",
                duration_s=0.125,
                rank_errors=[] if step == "passed" else failed,
                reports=[],
                report_rank=0,
                metrics={},
            )
            finished.add(index)
            on_outcome(spec, agreed)
            position += 1
            self._feed(position + 1 + self._script.lookahead)
        return WorldResult(self.started_s, 1.0, finished, None, fed=list(self.fed))

    def kill(self) -> None:
        self.killed.set()


class Scripted:
    """Starts `ScriptedWorld`s (the scheduler's `StartWorld`) and keeps each one it started.

    `steps` says, per test name, what each of its runs does in turn (the last one repeats;
    unnamed tests pass); the worlds numbered in `broken` (0 for the first one started) fail at
    start-up before running anything; starting those in `unstartable` raises, as a scheduler
    error would; `before[name]()` runs before each run of that test (a test's gate).
    """

    def __init__(
        self,
        steps: dict[str, list[Step]] | None = None,
        *,
        broken: Iterable[int] = (),
        unstartable: Iterable[int] = (),
        before: dict[str, Callable[[], None]] | None = None,
        lookahead: int = 2,
    ) -> None:
        self.steps: dict[str, list[Step]] = {n: list(todo) for n, todo in (steps or {}).items()}
        self.broken = set(broken)
        self.unstartable = set(unstartable)
        self.before = dict(before or {})
        self.lookahead = lookahead
        self.worlds: list[ScriptedWorld] = []
        self.refused: list[str] = []  # the names of the worlds whose start raised
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    def __call__(self, name: str, group: Group, take: Take, env: dict[str, str]) -> ScriptedWorld:
        with self._lock:
            number = len(self.worlds) + len(self.refused)
            if number in self.unstartable:
                self.refused.append(name)
                raise OSError(f"{name} could not be started")
            world = ScriptedWorld(self, number, name, group, take, env)
            self.worlds.append(world)
            self._changed.notify_all()
            return world

    def changed(self) -> None:
        """Wake every `wait_until`: a world started, or is hanging."""
        with self._changed:
            self._changed.notify_all()

    def wait_until(self, done: Callable[[], bool], what: str, timeout_s: float = 10) -> None:
        """Block until `done()` holds, checking it whenever a world starts or hangs; fail naming
        `what` after `timeout_s`."""
        with self._changed:
            assert self._changed.wait_for(done, timeout_s), what

    def step(self, spec: ConfigSpec) -> Step:
        with self._lock:
            todo: list[Step] = self.steps.get(spec.nodeid.split("::")[1], ["passed"])
            return todo.pop(0) if len(todo) > 1 else todo[0]


def schedule(
    groups: list[Group],
    script: Scripted,
    *,
    sink: RecordSink | None = None,
    workers: int = 1,
    world_cap: int | None = None,
    max_respawns: int = 3,
    reruns: int = 0,
    isolate: bool = False,
    slots: Slots | None = None,
    policy: RerunPolicy | None = None,
    stats: RunStats | None = None,
) -> tuple[list[AttemptRecord], RunStats, Scheduler]:
    """Run `groups` through a scheduler of scripted worlds to the end; every record it sent.
    `policy` (else one of `reruns` and `isolate`) and `stats` may be the caller's (an arrival
    budget reads the stats it is given)."""
    sent: list[AttemptRecord] = []
    lock = threading.Lock()

    def receive(record: AttemptRecord) -> None:
        if sink is not None:
            sink(record)
        with lock:
            sent.append(record)

    stats = RunStats() if stats is None else stats
    stats.planned(sum(len(g.configs) for g in groups))
    scheduler = Scheduler(
        groups,
        start_world=script,
        slots=slots or Slots([], cores=4),
        workers=workers,
        world_cap=world_cap,
        max_respawns=max_respawns,
        policy=policy or RerunPolicy(reruns=reruns, isolate=isolate),
        sink=receive,
        stats=stats,
    )
    scheduler.start()
    scheduler.stop(grace_s=30)  # every thread ends once there is no more work
    assert scheduler.finished()
    return sent, stats, scheduler


def attempts_of(sent: list[AttemptRecord]) -> dict[str, list[tuple[int, str, bool]]]:
    """Test name -> (attempt, outcome, final) of each record sent for it, in order."""
    out: dict[str, list[tuple[int, str, bool]]] = {}
    for record in sent:
        name = record.spec.nodeid.split("::")[1]
        out.setdefault(name, []).append(
            (record.result.attempt, record.result.outcome, record.final)
        )
    return out


def where(record: AttemptRecord) -> tuple[int, int]:
    """The (group, world) an attempt ran in (the results' `batch`)."""
    batch = record.result.batch
    assert batch is not None, record
    return batch.index, batch.world


def placed(sent: list[AttemptRecord]) -> dict[str, list[tuple[int, int]]]:
    """Test name -> the (group, world) each of its records ran in."""
    out: dict[str, list[tuple[int, int]]] = {}
    for record in sent:
        out.setdefault(record.spec.nodeid.split("::")[1], []).append(where(record))
    return out
