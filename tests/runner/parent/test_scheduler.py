"""The scheduler's rules, in process, on scripted worlds (`tests.runner.helpers.Scripted`).

A world takes its group's queue in order, up to the per-world cap; a crash or hang blames the
config in flight and gives the unbegun ones back to a fresh world; only worlds in a row that run
no config count towards the respawn cap, after which the group gives up; failures are rerun, each
attempt alone in a fresh world, once the queues are empty; a scheduler error keeps what was
agreed and requeues the rest; nothing of a config passes after its final record; several
workers share a group's queue. A real world's crash, hang and failed start are proven once each
in `test_faults.py`, reruns and isolation in `test_reruns.py` and `test_isolation.py`, what
the session makes of a scheduler error in `test_session.py`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from cpci.runner.parent.attempt_records import AttemptRecord
from cpci.runner.parent.planning import Group
from cpci.runner.parent.progress import RunStats
from cpci.runner.parent.rerun_policy import RerunPolicy
from cpci.runner.parent.scheduler import Scheduler
from cpci.runner.parent.slots import Slots
from tests.runner.helpers import Scripted, attempts_of, group, placed, schedule, where

NEEDS_TORCH = False  # in process, no world (tests/runner/conftest.py)

FIRST_PASS = (1, "passed", True)


def _names(script: Scripted) -> list[list[str]]:
    return [world.names for world in script.worlds]


def test_a_world_runs_its_groups_queue_in_order_and_each_config_gets_one_final_record() -> None:
    script = Scripted()
    sent, stats, _ = schedule([group("a", "b", "c")], script)
    assert attempts_of(sent) == {"a": [FIRST_PASS], "b": [FIRST_PASS], "c": [FIRST_PASS]}
    assert _names(script) == [["a", "b", "c"]]
    batches = [r.result.batch for r in sent]
    assert {(b.index, b.world, b.size, b.start_s) for b in batches if b} == {(0, 0, 3, 0.5)}
    assert (stats.worlds, stats.respawns, stats.running) == (1, 0, 0)
    assert stats.test_s == 3 * 0.125


def test_the_per_world_cap_starts_a_fresh_world_every_n_configs() -> None:
    script = Scripted()
    sent, stats, _ = schedule([group(*(f"s{i}" for i in range(5)))], script, world_cap=2)
    assert _names(script) == [["s0", "s1"], ["s2", "s3"], ["s4"]]  # fed ahead, but never past it
    assert [where(r)[1] for r in sent] == [0, 0, 1, 1, 2]
    assert stats.respawns == 0  # a world that reached its cap is no respawn


def test_a_crash_blames_the_config_in_flight_and_requeues_the_unbegun_ones_in_order() -> None:
    script = Scripted({"s2": ["crashed"]})
    sent, stats, _ = schedule([group(*(f"s{i}" for i in range(6)))], script)
    # The dead world had been fed s3 and s4 beyond its culprit: a fresh world takes them first.
    assert _names(script) == [["s0", "s1", "s2", "s3", "s4"], ["s3", "s4", "s5"]]
    assert {name: [w for _, w in where] for name, where in placed(sent).items()} == {
        "s0": [0],
        "s1": [0],
        "s2": [0],
        "s3": [1],
        "s4": [1],
        "s5": [1],
    }
    crash = next(r for r in sent if r.spec.nodeid == "t.py::s2")
    assert (crash.result.outcome, crash.final, crash.result.duration_s) == ("crashed", True, 0.25)
    assert crash.result.rank_errors[0].message == "t.py::s2 ended its world (crashed)"
    assert len(sent) == 6  # nothing lost, nothing run twice
    assert (stats.respawns, stats.crashed) == (1, ["t.py::s2"])


def test_crashes_blamed_on_configs_never_use_up_the_respawns() -> None:
    script = Scripted({"s0": ["crashed"], "s1": ["timeout"]})
    sent, stats, _ = schedule([group("s0", "s1", "s2", "s3")], script, max_respawns=0)
    assert [(r.result.outcome, where(r)[1]) for r in sent] == [
        ("crashed", 0),
        ("timeout", 1),  # each used up a config: a fresh world takes the rest
        ("passed", 2),
        ("passed", 2),
    ]
    assert (stats.crashed, stats.timed_out, stats.timeouts) == (["t.py::s0"], ["t.py::s1"], 1)


def test_a_group_gives_up_after_more_than_max_respawns_worlds_in_a_row_fail_to_start() -> None:
    # s1 crashes its world; the next two worlds fail at start-up: with one respawn allowed, the
    # second of them ends the group, and what was queued is not run, with why.
    script = Scripted({"s1": ["crashed"]}, broken={1, 2})
    sent, stats, _ = schedule([group("s0", "s1", "s2", "s3")], script, max_respawns=1)
    assert attempts_of(sent) == {
        "s0": [FIRST_PASS],
        "s1": [(1, "crashed", True)],
        "s2": [(1, "not_run", True)],  # fed to the crashed world, never begun, then given up
        "s3": [(1, "not_run", True)],
    }
    for record in sent[2:]:
        first = record.result.rank_errors[0]
        assert (first.rank, first.phase) == (-1, "world")
        assert first.message == (
            "not run: world start-up failed: rank 1 exited with code 2 (2 worlds in a row ended "
            "without running a config; --cpci-max-respawns 1: the group gave up)"
        )
        assert "conftest refuses" in first.detail
        assert where(record) == (0, 2)  # the last world that tried
    assert (len(script.worlds), stats.respawns) == (3, 2)


def test_a_config_that_never_began_is_not_rerun() -> None:
    script = Scripted(broken={0})
    sent, _, _ = schedule([group("s0", "s1")], script, max_respawns=0, reruns=2)
    assert attempts_of(sent) == {"s0": [(1, "not_run", True)], "s1": [(1, "not_run", True)]}
    assert len(script.worlds) == 1
    assert (
        sent[0]
        .result.rank_errors[0]
        .message.endswith(
            "(its world ended without running a config; --cpci-max-respawns 0: the group gave up)"
        )
    )


def test_failures_are_rerun_alone_each_in_a_fresh_world_once_the_queues_are_empty() -> None:
    script = Scripted(
        {
            "always": ["failed", "crashed", "failed"],
            "once": ["failed", "passed"],
            "crash_once": ["crashed", "passed"],
        }
    )
    sent, stats, _ = schedule([group("always", "once", "crash_once", "ok")], script, reruns=2)
    assert attempts_of(sent) == {
        "always": [(1, "failed", False), (2, "crashed", False), (3, "failed", True)],
        "once": [(1, "failed", False), (2, "passed", True)],
        "crash_once": [(1, "crashed", False), (2, "passed", True)],
        "ok": [FIRST_PASS],
    }
    # The pool's worlds first (the crash gave `ok` back to a fresh one), then one world per rerun.
    assert _names(script) == [
        ["always", "once", "crash_once", "ok"],
        ["ok"],
        ["always"],
        ["always"],
        ["once"],
        ["crash_once"],
    ]
    final = {r.spec.nodeid[6:]: r for r in sent if r.final}
    assert final["always"].result.rank_errors[-1].message == "failed 3/3 attempts"
    assert not final["always"].result.flaky
    assert (final["once"].result.flaky, final["crash_once"].result.flaky) == (True, True)
    assert final["once"].result.batch is not None
    assert final["once"].result.batch.world == 4  # the group's worlds are numbered in start order
    assert stats.flaky == ["t.py::once", "t.py::crash_once"]
    assert stats.crashed == ["t.py::crash_once"]  # a first pass's crash; reruns only count


def test_isolation_with_reruns_numbers_attempts_once_per_config() -> None:
    script = Scripted({"b_order": ["failed", "passed", "failed"], "c_broken": ["failed"]})
    sent, stats, _ = schedule(
        [group("a_pollutes", "b_order", "c_broken")], script, reruns=2, isolate=True
    )
    # The isolating alone run is the first rerun; the replay after the predecessors comes next.
    assert attempts_of(sent) == {
        "a_pollutes": [FIRST_PASS],  # its run in the replay's world is no attempt of its own
        "b_order": [(1, "failed", False), (2, "passed", False), (3, "failed", True)],
        "c_broken": [(1, "failed", False), (2, "failed", False), (3, "failed", True)],
    }
    assert _names(script) == [
        ["a_pollutes", "b_order", "c_broken"],
        ["b_order"],
        ["a_pollutes", "b_order"],
        ["c_broken"],
        ["c_broken"],
    ]
    final = {r.spec.nodeid[6:]: r.result for r in sent if r.final}
    assert (final["b_order"].isolation, final["b_order"].outcome) == ("order-dependent", "failed")
    assert final["b_order"].rank_errors[0].message == (
        "order-dependent: passes alone, fails after t.py::a_pollutes; found in 1 replay among 1 "
        "predecessors"
    )
    assert final["c_broken"].isolation == "fails-alone"
    assert stats.order_dependent == ["t.py::b_order"]


class Refusing:
    """The session's end of the scheduler, failing on the records of one config: as a results
    file that cannot be written, `times` times (None: every time), its `not_run` records too
    when `not_run_too`."""

    def __init__(self, name: str, times: int | None, *, not_run_too: bool = False) -> None:
        self.name, self.times, self.not_run_too = name, times, not_run_too
        self.refused: list[AttemptRecord] = []

    def __call__(self, record: AttemptRecord) -> None:
        ran = record.result.outcome != "not_run" or self.not_run_too
        more = self.times is None or len(self.refused) < self.times
        if record.spec.nodeid == f"t.py::{self.name}" and ran and more:
            self.refused.append(record)
            raise OSError("the results file could not be written")


def test_a_scheduler_error_keeps_what_was_agreed_and_requeues_the_rest() -> None:
    script = Scripted({"b": ["failed"]})
    sink = Refusing("c", times=1)
    sent, _, _ = schedule([group("a", "b", "c", "d")], script, sink=sink)
    assert attempts_of(sent) == {
        "a": [FIRST_PASS],
        "b": [(1, "failed", True)],  # a real failure stays a failure
        "c": [FIRST_PASS],  # its record did not get through: run again in the next world
        "d": [FIRST_PASS],
    }
    assert placed(sent)["c"] == [(0, 1)]
    assert _names(script) == [["a", "b", "c", "d"], ["c", "d"]]
    assert len(sink.refused) == 1


def test_only_what_cannot_be_requeued_is_not_run() -> None:
    script = Scripted({"b": ["failed"]})
    sent, _, _ = schedule(
        [group("a", "b", "c", "d")], script, sink=Refusing("c", times=None), max_respawns=1
    )
    assert {name: [o for _, o, _ in records] for name, records in attempts_of(sent).items()} == {
        "a": ["passed"],
        "b": ["failed"],
        "c": ["not_run"],  # its world and the next two could not send it: the group gave up
        "d": ["not_run"],
    }
    assert len(script.worlds) == 3
    message = next(r for r in sent if r.spec.nodeid == "t.py::d").result.rank_errors[0].message
    assert message == (
        "not run: cpci scheduler error: OSError('the results file could not be written') (2 "
        "worlds in a row ended without running a config; --cpci-max-respawns 1: the group gave up)"
    )


def test_a_thread_that_cannot_settle_a_config_ends_with_its_traceback() -> None:
    """Even the `not_run` record of `c` is refused: the thread ends, keeping why, and the
    scheduler says it is finished (the session then reports what it never got as not run)."""
    sink = Refusing("c", times=None, not_run_too=True)
    sent, _, scheduler = schedule(
        [group("a", "b", "c", "d")], Scripted(), sink=sink, max_respawns=0
    )
    assert set(attempts_of(sent)) == {"a", "b"}
    assert scheduler.finished()
    assert scheduler.error is not None
    assert "OSError: the results file could not be written" in scheduler.error
    assert [r.result.outcome for r in sink.refused] == ["passed", "passed", "not_run"]


def test_reruns_a_scheduler_error_stops_leave_the_last_attempt_as_the_one_final_record() -> None:
    script = Scripted({"x": ["failed"]}, unstartable={1})  # the rerun's world cannot be started
    sent, _, _ = schedule([group("x", "y")], script, reruns=2)
    assert attempts_of(sent) == {
        "x": [(1, "failed", False), (1, "failed", True)],
        "y": [FIRST_PASS],
    }
    final = sent[-1] if sent[-1].spec.nodeid == "t.py::x" else sent[-2]
    assert final.recorded  # its results line was written with the first attempt: not again
    assert final.note == (
        "reruns stopped: cpci scheduler error: OSError('world-0002-g0 could not be started')"
    )
    assert script.refused == ["world-0002-g0"]


def test_each_group_runs_in_worlds_of_its_own_size() -> None:
    script = Scripted()
    ones, twos = group("one_a", "one_b", world_size=1), group("two_a", "two_b", index=1)
    sent, _, _ = schedule([ones, twos], script, workers=2, slots=Slots([], cores=2))
    assert {name: where for name, where in placed(sent).items()} == {
        "one_a": [(0, 0)],
        "one_b": [(0, 0)],
        "two_a": [(1, 0)],
        "two_b": [(1, 0)],
    }
    assert sorted((w.group.world_size, w.names) for w in script.worlds) == [
        (1, ["one_a", "one_b"]),
        (2, ["two_a", "two_b"]),
    ]


def test_several_workers_share_a_queue_and_start_no_world_for_nothing() -> None:
    names = [f"s{i}" for i in range(12)]
    sent, _, _ = schedule(
        [group(*names, world_size=1)], Scripted(), workers=3, world_cap=3, slots=Slots([], 3)
    )
    assert sorted(r.spec.nodeid[6:] for r in sent) == sorted(names)  # each once


def test_two_workers_share_a_queue_so_a_slow_config_holds_up_only_its_world() -> None:
    # s0 waits for the queue's last config to begin: with worlds fed fixed chunks it would wait
    # for ever; with a shared queue the other world runs everything else.
    last_begun = threading.Event()

    def wait_for_the_last() -> None:
        assert last_begun.wait(10), "the other world never reached the last config"

    names = [f"s{i}" for i in range(10)]
    script = Scripted(before={"s0": wait_for_the_last, "s9": last_begun.set})
    sent, stats, _ = schedule(
        [group(*names, world_size=1)], script, workers=2, slots=Slots([], cores=2)
    )
    assert sorted(r.spec.nodeid[6:] for r in sent) == sorted(names)  # each once
    world_of = {r.spec.nodeid[6:]: where(r)[1] for r in sent}
    slow = world_of["s0"]
    assert world_of["s9"] != slow
    # The slow config's world took it and at most the two configs fed ahead of it.
    assert len([n for n, w in world_of.items() if w == slow]) <= 3
    assert (len(script.worlds), stats.respawns) == (2, 0)


def test_a_crash_with_two_workers_gives_its_unbegun_configs_back_to_the_shared_queue() -> None:
    names = [f"s{i}" for i in range(8)]
    script = Scripted({"s1": ["crashed"]})
    sent, stats, _ = schedule(
        [group(*names, world_size=1)], script, workers=2, slots=Slots([], cores=2)
    )
    assert sorted(r.spec.nodeid[6:] for r in sent) == names  # nothing lost, nothing run twice
    by_name = {r.spec.nodeid[6:]: r for r in sent}
    crash = by_name["s1"]
    assert (crash.result.outcome, crash.final) == ("crashed", True)
    dead = where(crash)[1]
    [dead_world] = [w for w in script.worlds if w.number == dead]
    given_back = dead_world.names[dead_world.names.index("s1") + 1 :]
    assert given_back  # it had been fed beyond its culprit
    assert all(where(by_name[n])[1] != dead for n in given_back)
    assert (stats.crashed, stats.respawns) == (["t.py::s1"], 1)


class AskedSlots(Slots):
    """CPU slots that say when a second world has asked for its devices (the first world's
    thread cannot ask again before its world ends)."""

    def __init__(self, cores: int) -> None:
        super().__init__([], cores)
        self.second_ask = threading.Event()
        self._asks = 0
        self._asks_lock = threading.Lock()

    def acquire(self, world_size: int) -> tuple[dict[str, str], Callable[[], None]]:
        with self._asks_lock:
            self._asks += 1
            if self._asks == 2:
                self.second_ask.set()
        return super().acquire(world_size)


def test_a_worker_that_finds_the_queue_empty_once_it_has_devices_starts_no_world() -> None:
    # The first world holds the only core until the second worker asks for it; by the time that
    # worker gets the core, the first world has taken the whole queue.
    slots = AskedSlots(cores=1)

    def second_worker_asks() -> None:
        assert slots.second_ask.wait(10), "the second worker never asked for the core"

    script = Scripted(before={"s0": second_worker_asks})
    sent, _, _ = schedule(
        [group("s0", "s1", "s2", "s3", "s4", world_size=1)], script, workers=2, slots=slots
    )
    assert _names(script) == [["s0", "s1", "s2", "s3", "s4"]]
    assert len(sent) == 5


def _scheduler(
    script: Scripted, *groups: Group, reruns: int = 0
) -> tuple[Scheduler, list[AttemptRecord]]:
    """A scheduler of scripted worlds the test starts and stops itself; what it sends."""
    sent: list[AttemptRecord] = []
    scheduler = Scheduler(
        list(groups),
        start_world=script,
        slots=Slots([], cores=2),
        workers=1,
        world_cap=None,
        max_respawns=3,
        policy=RerunPolicy(reruns=reruns),
        sink=sent.append,
        stats=RunStats(),
    )
    return scheduler, sent


def test_stop_kills_the_worlds_still_running_and_starts_no_other() -> None:
    script = Scripted({"hangs": ["hang"]})
    scheduler, sent = _scheduler(script, group("first", "hangs", "never"))
    scheduler.start()
    script.wait_until(lambda: bool(script.worlds) and script.worlds[0].hanging.is_set(), "no hang")
    scheduler.stop(grace_s=0.0)
    assert scheduler.finished()
    assert script.worlds[0].killed.is_set()
    # Killed, the world's ranks are gone: the config in flight crashed; `never` was given back
    # to a queue no world takes from any more.
    assert attempts_of(sent) == {"first": [FIRST_PASS], "hangs": [(1, "crashed", True)]}
    assert len(script.worlds) == 1
    assert scheduler.in_flight() == []


def test_a_rerun_killed_as_the_session_ends_is_no_attempt() -> None:
    script = Scripted({"x": ["failed", "hang"]})
    scheduler, sent = _scheduler(script, group("x"), reruns=2)
    scheduler.start()
    script.wait_until(
        lambda: len(script.worlds) == 2 and script.worlds[1].hanging.is_set(), "no rerun hung"
    )
    scheduler.stop(grace_s=0.0)
    assert attempts_of(sent) == {"x": [(1, "failed", False), (1, "failed", True)]}
    assert sent[-1].note == "reruns stopped after attempt 1: the session is ending"


def test_a_world_goes_first_to_the_group_with_the_fewest_live_worlds() -> None:
    # Group 0's configs run only once group 1 has a world: while the first worker's world of
    # group 0 runs, the second worker must start group 1's, though group 0's queue is not empty.
    script = Scripted()
    names = [f"a{i}" for i in range(6)]

    def group_1_started() -> None:
        script.wait_until(
            lambda: any(w.group.index == 1 for w in script.worlds), "group 1 never started"
        )

    script.before.update(dict.fromkeys(names, group_1_started))
    groups = [group(*names, world_size=1), group("b0", index=1, world_size=1)]
    sent, _, _ = schedule(groups, script, workers=2, slots=Slots([], cores=2))
    assert len(sent) == 7
    # Once group 1's world is done, a free worker may start a second world of group 0's queue.
    assert [w.group.index for w in script.worlds][:2] == [0, 1]


def test_a_config_alone_in_its_world_is_not_isolated_again() -> None:
    script = Scripted({"b": ["failed"]})
    sent, _, _ = schedule([group("a", "b")], script, world_cap=1, isolate=True)
    assert attempts_of(sent) == {"a": [FIRST_PASS], "b": [(1, "failed", True)]}
    assert _names(script) == [["a"], ["b"]]


@pytest.mark.parametrize("workers", [1, 4])
def test_no_thread_is_left_running_once_the_work_is_done(workers: int) -> None:
    before = set(threading.enumerate())
    schedule([group("a", "b"), group("c", index=1, world_size=1)], Scripted(), workers=workers)
    assert {t for t in threading.enumerate() if t.name.startswith("cpci-")} - before == set()
