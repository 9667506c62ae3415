"""The service's background compaction: every `CPCI_COMPACT_INTERVAL_S`, the raw results of
runs older than `CPCI_RAW_RETENTION_DAYS` are rolled up and deleted (`crud.compact.compact`),
as `cpci db compact` does by hand. Off where no retention is set."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy.engine import Engine

from cpci.server.crud.compact import CompactProgress, compact
from cpci.server.models import utcnow

log = logging.getLogger(__name__)


class CompactionJob:
    """`start()`, `stop()`; `wait_for_pass(n)` for tests and operators that must know the
    `n`-th pass is done. A pass that fails (the database away) is logged and retried at the
    next interval."""

    def __init__(
        self,
        engine: Engine,
        *,
        retention_days: float,
        interval_s: float,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._engine = engine
        self.retention = timedelta(days=retention_days)
        self.interval_s = interval_s
        self._clock = clock
        self._stopping = threading.Event()
        self._state = threading.Condition()
        self.passes = 0
        self.last: CompactProgress | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the compaction job is already started")
        self._thread = threading.Thread(target=self._run, name="cpci-compaction", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop after the batch in hand (each batch is its own transaction)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def wait_for_pass(self, n: int, timeout_s: float = 30.0) -> bool:
        """Wait until `n` passes are done; False when `timeout_s` passed first."""
        with self._state:
            return self._state.wait_for(lambda: self.passes >= n, timeout_s)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                done = compact(
                    engine=self._engine,
                    before=self._clock() - self.retention,
                    on_batch=self._between_batches,
                )
            except _Stopping:
                return
            except Exception:  # the database went away: log, try at the next interval
                log.exception("the compaction job could not compact the results")
            else:
                if done.results:
                    log.info(
                        "compacted %d results of %d runs into %d daily rows (%.0f results/s)",
                        done.results,
                        done.runs,
                        done.rollups,
                        done.results_per_s,
                    )
                with self._state:
                    self.last = done
                    self.passes += 1
                    self._state.notify_all()
            self._stopping.wait(self.interval_s)

    def _between_batches(self, _progress: CompactProgress) -> None:
        if self._stopping.is_set():
            raise _Stopping


class _Stopping(Exception):
    """Raised between two batches to end a pass when the service stops."""
