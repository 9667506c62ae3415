"""A launched world: start its ranks, feed it configs, watch it, and say how it ended.

The world takes its configs from a `Take` callback (its group's queue, or a fixed list for a rerun)
and gets them through its feed (`cpci.runner.wire.feed`), a few ahead of the config in flight, then
a `Close` once `Take` has no more. The parent never reads the world's stdout. It tails the files the
ranks write (journals, the agreed outcomes: `cpci.runner.parent.world_watch`) and enforces each
config's timeout: a hung config gets every rank's Python stack dumped (SIGUSR1 -> faulthandler),
and NCCL's flight recorder asked for its record of the collectives
(`cpci.runner.parent.nccl_diagnostics`), before the whole process tree is killed. A rank that dies
is named with its exit code or signal and the tail of its log. A line of the agreed outcomes the
parent cannot accept is an `error` of its config alone. When one rank's part of a torch harness
test fails and the others stay inside theirs, the world is ended and the config failed, as the
harness's parent ends it (`cpci.runner.wire.protocol.Left`).

`world_starter(launch)` is the scheduler's `StartWorld` for the session's launched worlds.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace
from pathlib import Path

from cpci.runner.launch.launcher import Ranks
from cpci.runner.parent import nccl_diagnostics
from cpci.runner.parent.planning import Group
from cpci.runner.parent.progress import InFlight
from cpci.runner.parent.world import OutcomeSink, StartWorld, Take, WorldFailure, WorldResult
from cpci.runner.parent.world_launch import WorldLaunch
from cpci.runner.parent.world_watch import Refused, WorldWatch
from cpci.runner.wire import collectives
from cpci.runner.wire.feed import LOOKAHEAD, FeedWriter
from cpci.runner.wire.protocol import AgreedRecord, PlanEntry, WorldPlan
from cpci.runner.wire.rank_errors import (
    explain_lost_peers,
    first_failing_first,
    rank_error,
    ranks_text,
    world_note,
)
from cpci.runner.wire.rank_exit import how_it_ended
from cpci.runner.wire.world_dir import WorldDir

#: How often the parent looks at the world's files. Ranks never wait for the parent.
_POLL_S = 0.01
#: How long ranks get to write their stacks once asked.
_STACK_DUMP_S = 5.0
#: How long the other ranks of a torch harness test may stay inside it once one rank's part
#: failed, before the world is ended as the harness ends it (the harness's parent terminates
#: them at once; this spares the world when they are only a moment behind).
HARNESS_GRACE_S = 5.0
_LOG_TAIL_BYTES = 16_000  # room for a fatal error's header, stack and module list


def world_starter(launch: WorldLaunch) -> StartWorld:
    """The scheduler's way to start the session's worlds: each with `launch`, its devices' `env`
    over the launch's own."""

    def start(name: str, group: Group, take: Take, env: dict[str, str]) -> LaunchedWorld:
        return LaunchedWorld(replace(launch, env={**launch.env, **env}), name, group, take)

    return start


class LaunchedWorld:
    """Runs the configs `take` gives (plan indices of `group`) in one fresh world, as they come."""

    def __init__(self, launch: WorldLaunch, name: str, group: Group, take: Take) -> None:
        self.launch = launch
        self.dir = WorldDir(launch.run_dir / name)
        self.world_size = group.world_size
        self.backend = group.backend
        self.configs = dict(enumerate(group.configs))
        self.fed: list[int] = []  # plan indices, in feed order
        self.started_s: float | None = None  # launch to the first config, once known
        #: The config running now, for the progress line (set by the thread running the world).
        self.in_flight: InFlight | None = None
        self._take = take
        self._ranks: Ranks | None = None

    def run(self, on_outcome: OutcomeSink) -> WorldResult:
        self.dir.path.mkdir(parents=True)
        self._write_plan()
        feed = FeedWriter(self.dir.feed)
        watch = WorldWatch(self.dir, self.world_size)
        self._feed(feed, watch)  # the first entries are there before any rank looks
        launched = time.time()
        self._ranks = self._start()
        failure: WorldFailure | None = None
        try:
            while True:
                # Look before draining: whatever the world wrote before it exited is then read.
                exited = self._ranks.poll()
                self._drain(watch, launched, on_outcome)
                self._note_in_flight(watch)
                if exited:
                    break
                self._feed(feed, watch)
                failure = self._check_deadlines(watch, launched)
                if failure is not None:
                    break
                time.sleep(_POLL_S)
            if failure is None and not (feed.closed and watch.finished.issuperset(self.fed)):
                failure = self._crash(watch)
        finally:
            self.in_flight = None
            self.kill()
            feed.close()
        return WorldResult(
            started_s=self.started_s,
            wall_s=time.time() - launched,
            finished=set(watch.finished),
            failure=failure,
            fed=list(self.fed),
        )

    def _feed(self, feed: FeedWriter, watch: WorldWatch) -> None:
        """Keep `LOOKAHEAD` entries fed beyond the config in flight; Close when `take` runs dry."""
        while not feed.closed and len(self.fed) - len(watch.finished) <= LOOKAHEAD:
            index = self._take()
            if index is None:
                feed.close()
                return
            self.fed.append(index)
            feed.add(PlanEntry(index=index, nodeid=self.configs[index].nodeid))

    def _note_in_flight(self, watch: WorldWatch) -> None:
        current = watch.in_flight()
        if current is None:
            self.in_flight = None
        elif self.in_flight is None or self.in_flight.began != current[1]:
            spec = self.configs[current[0]]
            self.in_flight = InFlight(spec.nodeid, current[1], spec.timeout, spec.timeout_from)

    def _drain(self, watch: WorldWatch, launched: float, on_outcome: OutcomeSink) -> None:
        watch.update()  # journals first: a config's begin precedes its outcome
        if self.started_s is None and watch.first_begin is not None:
            self.started_s = max(0.0, watch.first_begin - launched)
        for line in watch.agreed.read_new():
            agreed = line if isinstance(line, AgreedRecord) else self._refused(watch, line)
            if agreed is None:
                continue
            watch.finished.add(agreed.index)
            ordered = first_failing_first(agreed.rank_errors, watch.failed_at(agreed.index))
            ends = watch.ends(agreed.index)
            ordered = explain_lost_peers(
                ordered,
                {rank: end.outcome for rank, end in ends.items()},
                {rank: end.collective for rank, end in ends.items()},
            )
            on_outcome(
                self.configs[agreed.index], agreed.model_copy(update={"rank_errors": ordered})
            )

    def _refused(self, watch: WorldWatch, line: Refused) -> AgreedRecord | None:
        """An `error` for the config of a line the parent could not accept: the config it names,
        else the one in flight (rank 0 writes each config's line before the next begins)."""
        if line.index is not None and line.index in self.fed and line.index not in watch.finished:
            index = line.index
        else:
            current = watch.in_flight()
            if current is None:
                return None  # no config is waiting for it: nothing is lost
            index = current[0]
        elapsed = max(0.0, time.time() - watch.begun.get(index, time.time()))
        return AgreedRecord(
            index=index,
            outcome="error",
            duration_s=elapsed,
            rank_errors=[line.error],
            reports=[],
            report_rank=0,
            metrics={},
        )

    def kill(self) -> None:
        """Kill the world's whole process tree (safe to call twice, from any thread)."""
        if self._ranks is not None:
            self._ranks.kill()

    def _write_plan(self) -> None:
        plan = WorldPlan(
            backend=self.backend,
            invocation_dir=self.launch.invocation_dir,
            pytest_args=self.launch.pytest_args,
            # The process group's own timeout only backs up ours: ours must fire first. Any
            # config of the group may be fed.
            pg_timeout_s=max(c.timeout for c in self.configs.values()) + 60,
            # What the ranks collect: the files of every config of the group, unless node ids
            # need the parent's own arguments to come out the same (`world_launch.collect_args`).
            collect=self.launch.collect_args
            or list(dict.fromkeys(c.path for c in self.configs.values())),
        )
        self.dir.plan.write_text(plan.model_dump_json())

    def _start(self) -> Ranks:
        env = {**os.environ, **self.launch.env, "CPCI_OWNER_PID": str(os.getpid())}
        env.update(nccl_diagnostics.world_env(self.dir.path, env))
        env.setdefault("OMP_NUM_THREADS", "1")  # also silences torchrun's banner about it
        env.setdefault("PYTHONUNBUFFERED", "1")
        return self.launch.launcher.start(self.dir, self.world_size, env)

    def _check_deadlines(self, watch: WorldWatch, launched: float) -> WorldFailure | None:
        now = time.time()
        current = watch.in_flight()
        if current is None:
            if watch.first_begin is None and now - launched > self.launch.start_timeout_s:
                return self._timeout(
                    watch, None, f"the world did not start within {self.launch.start_timeout_s:g} s"
                )
            return None
        index, began = current
        spec = self.configs[index]
        if now - began > spec.timeout:
            limit = f"{spec.timeout:g} s (timeout from {spec.timeout_from})"
            return self._timeout(watch, index, f"config did not finish within {limit}")
        failed = watch.failed_part(index)
        if failed is not None and now - failed > HARNESS_GRACE_S:
            inside = [r for r in range(self.world_size) if (r, index) not in watch.left]
            return self._failed_alone(watch, index, inside)
        return None

    def _failed_alone(self, watch: WorldWatch, culprit: int, inside: list[int]) -> WorldFailure:
        """A rank's part of harness test `culprit` failed and the ranks `inside` did not end
        theirs: the test failed, with the failing ranks' errors first, then where the others
        were (their stacks)."""
        failing = sorted({r for (r, i), left in watch.left.items() if i == culprit and left.errors})
        who = ", ".join(map(str, failing))
        why = (
            f"rank {who} failed the test and rank {', '.join(map(str, inside))} stayed inside it "
            f"for {HARNESS_GRACE_S:g} s: the world was ended, as torch's harness ends a test "
            "when one rank fails"
        )
        diagnostics = self._diagnostics(watch)
        errors = [e for r in failing for e in watch.left[(r, culprit)].errors]
        for rank in inside:
            state = f"rank {rank} was still inside the test {HARNESS_GRACE_S:g} s after rank {who}"
            text = f"{state} failed it.\n{diagnostics[rank]}"
            errors.append(rank_error(rank, "world", text, f"{state} failed it"))
        errors.append(world_note("world", why))
        errors = first_failing_first(errors, watch.failed_at(culprit))
        return WorldFailure("failed", culprit, self._elapsed(watch, culprit), errors, why)

    def _diagnostics(self, watch: WorldWatch) -> dict[int, str]:
        """Each rank's Python stacks, after its NCCL flight recorder's record where it has one."""
        nccl_diagnostics.request_dumps(self.dir.path)
        stacks = self._dump_stacks(watch)
        dumps = nccl_diagnostics.collect(self.dir.path)
        texts = {}
        for rank in range(self.world_size):
            text = ""
            if rank in dumps:
                text += f"--- NCCL flight recorder of rank {rank} ---\n{dumps[rank]}\n"
            text += f"--- Python stacks of rank {rank} ---\n"
            text += stacks.get(rank, "(no stacks: the rank had not started up)\n")
            texts[rank] = text
        return texts

    def _timeout(self, watch: WorldWatch, culprit: int | None, why: str) -> WorldFailure:
        """The config in flight (the world's start-up, when `culprit` is None) outlasted its time.

        One headline names the ranks that did not finish it; each of them gets an entry with its
        stacks. A rank that finished the config failing keeps its own errors (it is a failing
        rank, and may be the cause); one that finished it without failing is no failing rank:
        the detail says so, with its stacks.
        """
        diagnostics = self._diagnostics(watch)
        ends = watch.ends(culprit) if culprit is not None else {}
        stuck = [r for r in range(self.world_size) if r not in ends]
        if culprit is None:
            headline = f"{why}: {ranks_text(stuck)} had not started running configs"
        elif stuck:
            headline = (
                f"{why}: {ranks_text(stuck)} did not finish it{_in_collectives(stuck, diagnostics)}"
            )
        else:
            headline = f"{why}: every rank finished it, but they did not agree on its outcome"
        finished = "".join(
            f"rank {rank} finished the config itself ({end.outcome}).\n{diagnostics[rank]}"
            for rank, end in sorted(ends.items())
            if not end.errors
        )
        errors = []
        for rank in stuck:
            text = f"{headline}.\n{diagnostics[rank]}" + (finished if rank == stuck[0] else "")
            errors.append(rank_error(rank, "world", text, headline))
        for rank, end in sorted(ends.items()):
            for n, error in enumerate(end.errors, start=1):
                more = f"\n{diagnostics[rank]}" if n == len(end.errors) else ""
                errors.append(rank_error(rank, error.phase, error.detail + more, error.message))
        if not stuck:
            errors.append(world_note("world", headline, finished))
        errors = first_failing_first(errors, watch.failed_at(culprit))
        return WorldFailure("timeout", culprit, self._elapsed(watch, culprit), errors, headline)

    def _dump_stacks(self, watch: WorldWatch) -> dict[int, str]:
        for pid in watch.pids.values():
            try:
                os.kill(pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass
        files = {rank: self.dir.stacks(rank) for rank in watch.pids}
        deadline = time.time() + _STACK_DUMP_S
        while time.time() < deadline and not all(_size(f) > 0 for f in files.values()):
            time.sleep(_POLL_S)
        # faulthandler writes thread by thread; give the last thread's lines a moment to land.
        sizes = {r: _size(f) for r, f in files.items()}
        time.sleep(0.1)
        while {r: _size(f) for r, f in files.items()} != sizes and time.time() < deadline:
            sizes = {r: _size(f) for r, f in files.items()}
            time.sleep(0.1)
        return {rank: f.read_text(errors="replace") for rank, f in files.items()}

    def _crash(self, watch: WorldWatch) -> WorldFailure:
        assert self._ranks is not None
        current = watch.in_flight()
        culprit = None if current is None else current[0]
        exits = {r: how_it_ended(self.dir.exit(r)) for r in range(self.world_size)}
        dead = [r for r, status in exits.items() if not status.stopped]
        if any(watch.current.get(r) != culprit for r in dead):
            culprit = None  # a rank died outside that config (at start-up, between configs)
        errors = []
        for rank in range(self.world_size):
            message = exits[rank].message
            tail = _tail(self.dir.log(rank))
            detail = f"{message}\n--- end of rank-{rank}.log ---\n{tail}"
            errors.append(rank_error(rank, "world", detail, message))
        # The rank that failed first leads (its own failure in the config, or its death); those
        # stopped afterwards (by torchrun, or by the fork launcher) follow.
        failed_at = watch.failed_at(culprit)
        for rank, ended in exits.items():
            if ended.t is not None and not ended.stopped:
                failed_at[rank] = min(ended.t, failed_at.get(rank, ended.t))
        errors = first_failing_first(errors, failed_at)
        reason = errors[0].message
        if not any(ended.recorded for ended in exits.values()):
            how, log = self._ranks.ended()
            reason = f"{how} before any rank ran"
            detail = f"{reason}\n--- end of {log.name} ---\n{_tail(log)}"
            errors.append(world_note("world", reason, detail))
        return WorldFailure("crashed", culprit, self._elapsed(watch, culprit), errors, reason)

    @staticmethod
    def _elapsed(watch: WorldWatch, culprit: int | None) -> float:
        return 0.0 if culprit is None else max(0.0, time.time() - watch.begun[culprit])


def _in_collectives(ranks: list[int], diagnostics: dict[int, str]) -> str:
    """` (in barrier)`, ` (rank 0 in barrier, rank 2 in all_reduce)`: the collectives the ranks'
    stacks show them in, where they show one."""
    places = {r: place for r in ranks if (place := collectives.waiting_in(diagnostics[r]))}
    if not places:
        return ""
    if len(ranks) == 1:
        return f" (in {places[ranks[0]]})"
    return " (" + ", ".join(f"rank {r} in {place}" for r, place in places.items()) + ")"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - _LOG_TAIL_BYTES))
            return fh.read().decode(errors="replace")
    except FileNotFoundError:
        return "(no log)"
