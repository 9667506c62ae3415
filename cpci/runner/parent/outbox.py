"""The once-per-config outbox: every attempt record of a config passes, up to its final one.

The scheduler's threads send each attempt of a config as it becomes known; the outbox hands it to
the session (`RecordSink`: the results file, and pytest for the final one) and remembers, per
config, the latest record sent and whether the final one went out. After a config's final
record nothing more of it passes: a scheduler error settles a config whose rerun is still queued,
and the rerun may yet run, but pytest and the results file get one verdict per config. A record
the sink refuses (it raised) was not sent: the config is left as it was, for the scheduler's
error path to requeue.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from cpci.runner.parent.attempt_records import AttemptRecord

#: Where sent records go: the session's, which writes the results line and reports final ones.
RecordSink = Callable[[AttemptRecord], None]


class Outbox:
    """Attempt records on their way to the session, once per config's final record."""

    def __init__(self, sink: RecordSink) -> None:
        self._sink = sink
        self._lock = threading.Lock()
        self._settled: set[str] = set()  # node ids whose final record went out
        self._latest: dict[str, AttemptRecord] = {}  # node id -> its latest record sent

    def send(self, record: AttemptRecord) -> None:
        """Hand `record` to the sink, unless its config's final record went out already; if the
        sink raises, the config is as it was before and the exception goes on."""
        nodeid = record.spec.nodeid
        with self._lock:
            if nodeid in self._settled:
                return
            before = self._latest.get(nodeid)
            self._latest[nodeid] = record
            if record.final:
                self._settled.add(nodeid)
        try:
            self._sink(record)
        except BaseException:
            with self._lock:
                self._settled.discard(nodeid)
                if before is None:
                    del self._latest[nodeid]
                else:
                    self._latest[nodeid] = before
            raise

    def settled(self, nodeid: str) -> bool:
        """Whether the config's final record went out."""
        with self._lock:
            return nodeid in self._settled

    def latest(self, nodeid: str) -> AttemptRecord | None:
        """The config's latest record sent, if any went out."""
        with self._lock:
            return self._latest.get(nodeid)
