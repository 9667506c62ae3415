"""The collector pause of bulk reads: off while any read runs, back as it was after the last.

Threads are sequenced with events (no sleeps): the second read starts while the first runs, and
the first ends while the second still runs.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from cpci.server.core.gc_pause import gc_paused


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_the_collector_is_off_during_a_read_and_on_after_it_even_when_it_fails() -> None:
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError, match="read failed"), gc_paused():
        raise RuntimeError("read failed")
    assert gc.isenabled()


def test_a_decorated_loader_runs_paused_and_keeps_its_value() -> None:
    @gc_paused()
    def load(n: int) -> tuple[int, bool]:
        return n, gc.isenabled()

    assert load(3) == (3, False)
    assert gc.isenabled()


def test_the_collector_resumes_only_when_the_last_concurrent_read_ends() -> None:
    second_started, first_done = threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def second() -> None:
        with gc_paused():
            second_started.set()
            first_done.wait(timeout=30)
            seen["second, after the first ended"] = gc.isenabled()

    thread = threading.Thread(target=second)
    with gc_paused():
        thread.start()
        assert second_started.wait(timeout=30)
    first_done.set()
    thread.join(timeout=30)
    assert seen == {"second, after the first ended": False}
    assert gc.isenabled()


def test_a_collector_switched_off_by_its_process_stays_off() -> None:
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()
