"""The run's statistics, the live progress line and the closing summary.

`RunStats` is told what happened, in words of the run (a world started or ended, a config ran or
was settled, a world ended on a config, reruns settled one), from the scheduler's threads and the
main thread alike; it keeps its own lock, so no caller takes one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from cpci.schema import FAILING_OUTCOMES, NOT_RUN_OUTCOMES, ResultRecord


class InFlight(NamedTuple):
    """The config a world is running now: the progress line names it once it stalls."""

    nodeid: str
    began: float  # wall-clock time its first rank began it
    timeout: float
    timeout_from: str


@dataclass
class RunStats:
    """What the run has done so far (read its fields; tell it through its methods)."""

    total: int = 0
    started_at: float = field(default_factory=time.monotonic)
    done: int = 0
    failed: int = 0
    worlds: int = 0  # worlds that ended
    running: int = 0  # worlds running now
    respawns: int = 0  # fresh worlds that took the rest of a dead world's queue
    init_s: float = 0.0
    test_s: float = 0.0  # every attempt's time, those that crashed or timed out included
    timeouts: int = 0  # attempts that timed out (reruns included)
    timeout_s: float = 0.0  # the part of test_s those attempts ran until their timeout
    crashed: list[str] = field(default_factory=list)
    timed_out: list[str] = field(default_factory=list)
    flaky: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)  # never began: red, but not the code's fault
    order_dependent: list[str] = field(default_factory=list)
    #: What an order-dependent config's bisection found ("fails after X; found in ...").
    polluters: dict[str, str] = field(default_factory=dict)
    #: Failures the chance test decided, with the attempts it took: (node id, attempts).
    decided_after: list[tuple[str, int]] = field(default_factory=list)
    arrived: list[str] = field(default_factory=list)  # new configs given arrival runs
    flaky_on_arrival: list[str] = field(default_factory=list)  # a pass and a failure among them
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def planned(self, total: int) -> None:
        """The configs the run is to settle (known once the session is planned)."""
        with self._lock:
            self.total = total

    def world_started(self) -> None:
        with self._lock:
            self.running += 1

    def world_ended(self, start_up_s: float | None) -> None:
        """A world is over, however it ended (a scheduler error included), after `start_up_s`
        of start-up (None: no config began)."""
        with self._lock:
            self.running -= 1
            self.worlds += 1
            self.init_s += start_up_s or 0.0

    def respawned(self) -> None:
        """A fresh world takes the rest of a dead world's queue."""
        with self._lock:
            self.respawns += 1

    def config_ran(self, seconds: float) -> None:
        """One attempt of a config ran to an agreed outcome."""
        with self._lock:
            self.test_s += seconds

    def ended_on(self, nodeid: str, kind: str, seconds: float, *, first: bool) -> None:
        """A world ended on the config `nodeid` (`kind`: crashed, timeout or failed) after it ran
        `seconds`; `first`: its first attempt, which the summary lists (reruns only count)."""
        with self._lock:
            self.test_s += seconds
            if kind == "timeout":
                self.timeouts += 1
                self.timeout_s += seconds
            if first and kind == "crashed":
                self.crashed.append(nodeid)
            elif first and kind == "timeout":
                self.timed_out.append(nodeid)

    def configs_s(self) -> float:
        """Every attempt's time so far (what new configs' arrival runs are a share of)."""
        with self._lock:
            return self.test_s

    def rerun_settled(self, result: ResultRecord) -> None:
        """A config's reruns (or arrival runs) settled it: order-dependent, flaky and flaky on
        arrival ones are listed, with what bisecting an order-dependent one's predecessors
        found."""
        with self._lock:
            if result.isolation == "order-dependent":
                self.order_dependent.append(result.nodeid)
                if result.order_dependence is not None:
                    self.polluters[result.nodeid] = result.order_dependence.text()
            elif result.flaky:
                self.flaky.append(result.nodeid)
            if result.arrival:
                self.arrived.append(result.nodeid)
                if result.outcome in FAILING_OUTCOMES:
                    self.flaky_on_arrival.append(result.nodeid)

    def decided(self, nodeid: str, attempts: int) -> None:
        """The chance test decided the config's failure after `attempts`: no more reruns."""
        with self._lock:
            self.decided_after.append((nodeid, attempts))

    def settled(self, nodeid: str, outcome: str) -> None:
        """The config's final record is known: it is done (counted failed, or not run)."""
        with self._lock:
            self.done += 1
            if outcome in NOT_RUN_OUTCOMES:
                self.not_run.append(nodeid)
            elif outcome in FAILING_OUTCOMES:
                self.failed += 1

    def all_settled(self) -> bool:
        """Whether every planned config has its final record (the run was not cut short)."""
        with self._lock:
            return self.done >= self.total

    def progress_line(self, in_flight: Sequence[InFlight] = (), stalled_s: float = 0.0) -> str:
        """The live line; each config of `in_flight` that has run `stalled_s` or longer is named,
        with when its timeout ends it (on the line's own elapsed clock), so a line that stays at
        8/15 says what it waits for."""
        with self._lock:
            elapsed = time.monotonic() - self.started_at
            left = self.total - self.done
            eta = "?" if self.done == 0 else _clock(elapsed / self.done * left)
            line = (
                f"cpci: {self.done}/{self.total} configs done, {self.failed} failed, "
                f"{len(self.not_run)} not run, {left} left, "
                f"elapsed {_clock(elapsed)}, ETA {eta}, {self.running} world(s) running"
            )
        now = time.time()
        for flight in sorted(in_flight, key=lambda f: f.began):
            running = now - flight.began
            if running >= stalled_s:
                ends_at = elapsed + flight.began + flight.timeout - now
                line += (
                    f"; waiting on {flight.nodeid} for {_clock(running)}, its timeout "
                    f"({flight.timeout:g} s, from {flight.timeout_from}) ends it at "
                    f"{_clock(ends_at)}"
                )
        return line

    def summary_lines(self) -> list[str]:
        with self._lock:
            timeouts = (
                f"; {self.timeout_s:.1f} s of it until {self.timeouts} timeout(s)"
                if self.timeouts
                else ""
            )
            lines = [
                f"{self.worlds} world(s) started ({self.respawns} respawn(s)), "
                f"world start-up {self.init_s:.1f} s, configs {self.test_s:.1f} s "
                f"({self.done} config(s){timeouts})"
            ]
            for label, nodeids in (
                ("crashed", self.crashed),
                ("timed out", self.timed_out),
                ("not run (never started: no verdict on their code)", self.not_run),
                ("flaky (failed, then passed when rerun)", self.flaky),
                (
                    "order-dependent (pass alone, fail after their predecessors)",
                    self.order_dependent,
                ),
            ):
                if nodeids:
                    lines.append(f"{len(nodeids)} {label}:")
                    lines.extend(
                        f"  {n}: {self.polluters[n]}" if n in self.polluters else f"  {n}"
                        for n in nodeids
                    )
            if self.decided_after:
                lines.append(
                    f"{len(self.decided_after)} failure(s) decided by their base-branch evidence "
                    "(no flake fails so: not rerun further):"
                )
                lines.extend(f"  {n}: decided after {k} attempt(s)" for n, k in self.decided_after)
            if self.arrived:
                foa = self.flaky_on_arrival
                lines.append(
                    f"{len(self.arrived)} new config(s) run again alone (--cpci-new-config-runs), "
                    f"{len(foa)} FLAKY ON ARRIVAL (passed, then failed an arrival run)"
                    + (":" if foa else "")
                )
                lines.extend(f"  {n}" for n in foa)
            return lines


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(max(0.0, seconds)), 60)
    return f"{minutes}:{secs:02d}"
