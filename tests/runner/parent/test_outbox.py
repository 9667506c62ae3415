"""The outbox lets every attempt of a config pass up to its final one, and nothing after it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cpci.runner.parent.attempt_records import AttemptRecord, Where, of_not_run
from cpci.runner.parent.outbox import Outbox
from tests.runner.helpers import specs

NEEDS_TORCH = False  # in process, no world (tests/runner/conftest.py)

(SPEC,) = specs("test_a")
FIRST = of_not_run(SPEC, "boom", "", Where(attempt=1, backend="gloo", batch=None))


def test_nothing_of_a_config_passes_after_its_final_record() -> None:
    """A scheduler error settles a config whose rerun is still queued; when that rerun then
    runs, its records must reach neither pytest nor the results file."""
    sent: list[AttemptRecord] = []
    outbox = Outbox(sent.append)
    outbox.send(FIRST)  # a first attempt, to be rerun
    assert (outbox.settled(SPEC.nodeid), outbox.latest(SPEC.nodeid)) == (False, FIRST)
    stands = replace(FIRST, final=True, recorded=True, note="reruns stopped: boom")
    outbox.send(stands)
    outbox.send(replace(FIRST, final=False))  # the rerun, late
    outbox.send(replace(FIRST, final=True))
    assert sent == [FIRST, stands]
    assert (outbox.settled(SPEC.nodeid), outbox.latest(SPEC.nodeid)) == (True, stands)


def test_a_record_the_sink_refuses_was_not_sent() -> None:
    refuse = [True]

    def sink(record: AttemptRecord) -> None:
        if refuse.pop():
            raise OSError("the results file could not be written")

    outbox = Outbox(sink)
    final = replace(FIRST, final=True)
    with pytest.raises(OSError, match="could not be written"):
        outbox.send(final)
    assert (outbox.settled(SPEC.nodeid), outbox.latest(SPEC.nodeid)) == (False, None)
    refuse.append(False)
    outbox.send(final)  # the config was left as it was: its record may go out again
    assert outbox.settled(SPEC.nodeid)


def test_a_refused_rerun_leaves_the_record_before_it_as_the_latest() -> None:
    def sink(record: AttemptRecord) -> None:
        if record.result.attempt == 2:
            raise OSError("full disk")

    outbox = Outbox(sink)
    outbox.send(FIRST)
    second = replace(FIRST, result=FIRST.result.model_copy(update={"attempt": 2}))
    with pytest.raises(OSError, match="full disk"):
        outbox.send(second)
    assert outbox.latest(SPEC.nodeid) == FIRST
