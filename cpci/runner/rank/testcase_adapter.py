"""Running one test of torch's multi-process harnesses on every rank of a cpci world.

Stock, a `MultiProcessTestCase` test runs `setUp` in a parent that spawns `world_size` fresh
interpreters, each of which runs the class's `_run(rank, test_name, file_name, pipe)` (its own
process-group init, the body through `run_test`, its own teardown) and ends with an exit code the
parent turns into a pass, a failure or a skip (`TEST_SKIPS`). Here every rank plays both parts
in the process it already has, through pytest's own unittest protocol:

1. the class's `setUp` runs with the spawn made a no-op; rank 0's environment changes (e.g.
   distributed_test's TEMP_DIR and INIT_METHOD) and a fresh rendezvous file, the same on all
   ranks, reach the other ranks through the world's store, as the spawned children inherit them;
2. cpci's default process group is released, and the class's own `_run` runs as the child would,
   with a real pipe for the traceback it sends; its exit code means what it means to the
   harness: 0 passes, `TEST_ERROR_EXIT_CODE` fails with the child's traceback, a `TEST_SKIPS`
   code skips with its message, any other code fails;
3. the rank journals how its part ended (`Left`), whatever group the test left is destroyed, all
   ranks meet at a store barrier, and the class's `tearDown` runs (rank 0's removes what every
   rank used). Stock, a failing child exits and the parent terminates the others; here the
   failed rank lives on, and a group of the test it still holds (a DeviceMesh's, say) can keep
   its peers waiting, so the parent ends the world when the others stay inside their parts
   after one failed (`cpci.runner.parent.launched_world`), and the config is failed, not timed out.

`MultiProcContinuousTest` classes run the same way with that harness's worker steps
(`_init_pg`, `_run_test_given_id`) per test, so each test gets its own result: no poison pill.
Crashes, hangs, per-rank failures and state reset are cpci's, as for marked tests.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import traceback
import unittest
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from functools import partial, update_wrapper
from typing import Any

import pytest

from cpci.runner.harness import HARNESS_MODULE, Family, harness_family
from cpci.runner.wire.rank_errors import exception_line, rank_error
from cpci.schema import RankError, first_line

#: Keys this adapter uses live under this prefix of the world's store.
PREFIX = "cpci/testcases"
#: How long a rank waits for the others at the adapter's store rendezvous. The parent's per-config
#: watchdog is what times a hung config out; this only bounds a wait it would never reach.
_STORE_WAIT = timedelta(hours=6)


class HarnessExit(AssertionError):
    """A rank's harness child ended the way the stock harness counts as a failure."""


@dataclass(frozen=True)
class Shared:
    """What rank 0's parent part hands every rank before the test body, as spawn would."""

    file_name: str
    env_set: dict[str, str]
    env_unset: list[str]

    def to_json(self) -> str:
        return json.dumps(
            {"file_name": self.file_name, "env_set": self.env_set, "env_unset": self.env_unset}
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Shared:
        raw = json.loads(text)
        return cls(raw["file_name"], dict(raw["env_set"]), list(raw["env_unset"]))


class WorldLink:
    """This rank's place in the world, and the store the adapter's rendezvous go through.

    Each test's keys are named for the test (and how often this world ran it), not for a running
    count, so a rank that missed a test (its setUp failed) cannot read another test's keys.
    """

    def __init__(
        self,
        *,
        rank: int,
        world_size: int,
        release: Callable[[], None],
        left: Callable[[list[RankError]], None],
        store: Any,
    ) -> None:
        import torch.distributed as dist

        self.rank = rank
        self.world_size = world_size
        self.release = release  # destroys cpci's default group; cpci brings it back later
        self.left = left  # journals how this rank's part ended (`cpci.runner.wire.protocol.Left`)
        self._store = dist.PrefixStore(PREFIX, store)
        self._runs: dict[str, int] = {}
        self._rounds: list[str] = []  # this rank's rounds, oldest first
        self._round = ""

    def share(self, test_id: str, make: Callable[[], Shared]) -> Shared:
        """Rank 0's `make()`, on every rank: the start of test `test_id`'s round."""
        self._runs[test_id] = self._runs.get(test_id, 0) + 1
        self._round = f"{test_id}#{self._runs[test_id]}"
        self._rounds.append(self._round)
        key = f"{self._round}/shared"
        if self.rank == 0:
            self._forget()
            shared = make()
            self._store.set(key, shared.to_json())
            return shared
        self._store.wait([key], _STORE_WAIT)
        return Shared.from_json(self._store.get(key))

    def barrier(self) -> None:
        """Return once every rank got here in the current round (a store barrier)."""
        self._store.set(f"{self._round}/arrived/{self.rank}", "1")
        self._store.wait(self._arrived(self._round), _STORE_WAIT)

    def _arrived(self, round_: str) -> list[str]:
        return [f"{round_}/arrived/{r}" for r in range(self.world_size)]

    def _forget(self) -> None:
        # Rank 0 is past the last round's barrier: every rank has arrived there, which it does
        # only after leaving the round before, whose keys nobody reads any more.
        if len(self._rounds) < 3:
            return
        old = self._rounds.pop(0)
        for key in [f"{old}/shared", *self._arrived(old)]:
            self._store.delete_key(key)


class TestcaseAdapter:
    """Registered in each rank's pytest; turns each harness test into its rank's part of it."""

    def __init__(self, link: Callable[[], WorldLink]) -> None:
        self._make_link = link
        self._link: WorldLink | None = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        # Joined before the test's fixtures run: a setUpClass may rewrite MASTER_ADDR/PORT.
        if self._link is None and harness_family(getattr(item, "cls", None)) is not None:
            self._link = self._make_link()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        family = harness_family(getattr(item, "cls", None))
        if family is None:
            return (yield)
        assert self._link is not None, "pytest_runtest_setup joins the store first"
        with _as_rank(item, family, self._link):
            return (yield)


@contextmanager
def _as_rank(item: pytest.Item, family: Family, link: WorldLink) -> Iterator[None]:
    """While pytest runs `item`, make its unittest case this rank's part of the harness test."""
    testcase: Any = item.instance  # type: ignore[attr-defined]
    cls = type(testcase)
    test = item.obj  # type: ignore[attr-defined]
    try:
        if family == "multiprocess":
            testcase._spawn_processes = _no_spawn
            testcase._start_processes = _no_spawn
            before = dict(os.environ)
            item.obj = _body(test, partial(_run_multiprocess, testcase, link, before))  # type: ignore[attr-defined]
            yield
            return
        # MultiProcContinuousTest.setUp would spawn the class's workers and feed them this test.
        with _class_attrs(cls, _processes_spawned=True, task_queues=[], poison_pill=False):
            item.obj = _body(test, partial(_run_continuous, testcase, link))  # type: ignore[attr-defined]
            yield
    finally:
        item.obj = test  # type: ignore[attr-defined]  # reports locate the test, not the adapter


def _body(test: Any, run: partial[None]) -> Callable[[], None]:
    """`run` in the test method's place, carrying what unittest reads off the method.

    `skip_but_pass_in_sandcastle_if` and `unittest.skip` mark the method itself
    (`__unittest_skip__`), as the harness's own `join_or_run` wrapper keeps them.
    """
    return update_wrapper(run, test)


def _no_spawn(*args: Any, **kwargs: Any) -> None:
    """The harness's spawn, in a cpci rank: this process is the rank."""


def _run_multiprocess(testcase: Any, link: WorldLink, before: dict[str, str]) -> None:
    """The body of a MultiProcessTestCase test on this rank (`setUp` has run, spawn-less)."""
    __tracebackhide__ = True  # the report shows the test's frames, not the adapter's
    own_file = getattr(testcase, "file_name", None)
    shared = link.share(testcase.id(), lambda: _parent_part(before))
    _apply(shared)
    if own_file and own_file != shared.file_name:
        _remove(own_file)  # the rank's own NamedTemporaryFile from setUp, never used
    testcase.rank = link.rank
    testcase.file_name = shared.file_name
    name = testcase._testMethodName
    receive, send = multiprocessing.Pipe()
    link.release()
    with _part(link, shared), closing(receive), closing(send):
        code = _exit_code(
            lambda: type(testcase)._run(
                link.rank, name, shared.file_name, send, fake_pg=getattr(testcase, "fake_pg", False)
            )
        )
        _skip_or_fail(code, link.rank, _drain(receive))


def _run_continuous(testcase: Any, link: WorldLink) -> None:
    """The body of a MultiProcContinuousTest test on this rank: the worker's steps, per test."""
    __tracebackhide__ = True
    cls = type(testcase)
    shared = link.share(testcase.id(), lambda: _parent_part(dict(os.environ)))
    link.release()
    with _part(link, shared), _class_attrs(cls, rank=link.rank, world_size=link.world_size):
        code = _exit_code(lambda: cls._init_pg(link.rank, link.world_size, shared.file_name))
        _skip_or_fail(code, link.rank)
        code = _exit_code(lambda: cls._run_test_given_id(testcase.id()))  # raises what fails
        _skip_or_fail(code, link.rank)


@contextmanager
def _part(link: WorldLink, shared: Shared) -> Iterator[None]:
    """This rank's part of the test, and what follows it on every rank however it ended.

    It says how the part ended (`WorldLink.left`) before it waits: stock, a rank that fails
    exits and the harness terminates the others, and here the parent ends the world when the
    others stay inside their parts after one failed. Then the groups the test left are
    destroyed, every rank meets at a store barrier, and rank 0 removes the rendezvous file.
    """
    errors: list[RankError] = []
    try:
        yield
    except unittest.SkipTest:
        raise
    except HarnessExit as exc:  # its message, then the child's traceback
        errors.append(rank_error(link.rank, "call", str(exc), first_line(str(exc), limit=None)))
        raise
    except Exception as exc:  # what the test raised itself (MultiProcContinuousTest's steps)
        errors.append(rank_error(link.rank, "call", "".join(traceback.format_exception(exc))))
        raise
    finally:
        link.left(errors)
        _leave_groups()
        link.barrier()
        if link.rank == 0:
            shutil.rmtree(os.path.dirname(shared.file_name), ignore_errors=True)


def _parent_part(before: dict[str, str]) -> Shared:
    """On rank 0: a fresh rendezvous file and what `setUp` changed in the environment."""
    directory = tempfile.mkdtemp(prefix="cpci-testcase-")
    file_name = os.path.join(directory, "rendezvous")
    open(file_name, "wb").close()  # like the harness's NamedTemporaryFile: there, and empty
    now = dict(os.environ)
    return Shared(
        file_name=file_name,
        env_set={k: v for k, v in now.items() if before.get(k) != v},
        env_unset=[k for k in before if k not in now],
    )


def _apply(shared: Shared) -> None:
    os.environ.update(shared.env_set)
    for name in shared.env_unset:
        os.environ.pop(name, None)


def _exit_code(run: Callable[[], object]) -> int:
    """What the harness child's exit code would be: `sys.exit`'s, or 0 when it returns."""
    try:
        run()
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        return code if isinstance(code, int) else 1
    return 0


def _skip_or_fail(code: int, rank: int, messages: Sequence[object] = ()) -> None:
    """What the harness makes of a child's exit code: 0 passes, `TEST_ERROR_EXIT_CODE` fails with
    what the child sent up its pipe (`messages`: its traceback), a `TEST_SKIPS` code skips with
    its message, any other code fails."""
    __tracebackhide__ = True
    if code == 0:
        return
    harness = sys.modules[HARNESS_MODULE]
    if code == harness.MultiProcessTestCase.TEST_ERROR_EXIT_CODE and messages:
        sent = "\n".join(str(m) for m in messages)
        raise HarnessExit(
            f"rank {rank} exited with error code {code} and exception: "
            f"{exception_line(sent)}\n{sent}"
        )
    for skip in harness.TEST_SKIPS.values():
        if skip.exit_code == code:
            raise unittest.SkipTest(skip.message)
    raise HarnessExit(f"rank {rank} exited with code {code}; the harness expects 0")


def _drain(receive: Any) -> list[object]:
    """Everything the child part sent up its pipe (its traceback, on an error)."""
    messages: list[object] = []
    try:
        while receive.poll(0):
            messages.append(receive.recv())
    except (EOFError, OSError):
        pass
    return messages


def _leave_groups() -> None:
    """Destroy the process group the test made and left behind (its process would have exited)."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


_MISSING = object()


@contextmanager
def _class_attrs(cls: type, **values: Any) -> Iterator[None]:
    """Set class attributes for the duration; put back (or remove) what was there."""
    saved = {name: cls.__dict__.get(name, _MISSING) for name in values}
    for name, value in values.items():
        setattr(cls, name, value)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, old)


def link_factory(config: pytest.Config) -> Callable[[], WorldLink]:
    """How a rank joins the adapter's rendezvous, once it meets its first harness test."""

    def link() -> WorldLink:
        from cpci.runner.rank import world_store
        from cpci.runner.rank.plugin import DEFAULT_GROUP, DIST_CONTEXT, LEFT

        context = config.stash[DIST_CONTEXT]
        return WorldLink(
            rank=context.rank,
            world_size=context.world_size,
            release=config.stash[DEFAULT_GROUP].release,
            left=config.stash[LEFT],
            store=world_store.connect(_STORE_WAIT.total_seconds()),
        )

    return link
