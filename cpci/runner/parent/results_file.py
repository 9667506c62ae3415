"""The run's results file: one `cpci.result/1` line per config attempt, durable the moment it ends.

It is a journal (see `cpci.runner.wire.journal`) of `ResultRecord` lines: each written whole and
fsynced, so a run killed halfway keeps every result it had, and `cpci upload` reads it as is.
"""

from __future__ import annotations

from pathlib import Path

from cpci.runner.wire.journal import JournalWriter
from cpci.schema import ResultRecord


class ResultsFile:
    """The results file of one run, started empty; appended to from the scheduler's threads."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._writer = JournalWriter(path, truncate=True)  # a results file belongs to one run

    def append(self, record: ResultRecord) -> None:
        self._writer.write_line(record.to_json_line())

    def close(self) -> None:
        self._writer.close()
