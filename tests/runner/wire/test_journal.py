"""Journals: each line durable when written; a reader never sees half a line."""

from __future__ import annotations

import threading
from pathlib import Path

from cpci.runner.wire.journal import JournalReader, JournalWriter
from cpci.runner.wire.protocol import Begin, Done, parse_journal_event

NEEDS_TORCH = False  # in process, no world (tests/runner/conftest.py)


def test_reader_returns_only_new_complete_lines(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    reader = JournalReader(path, parse_journal_event)
    assert reader.read_new() == []  # no file yet
    writer = JournalWriter(path)
    writer.write(Begin(index=0, t=1.0))
    assert reader.read_new() == [Begin(index=0, t=1.0)]
    with open(path, "ab") as fh:
        fh.write(b'{"ev": "done", ')  # a writer died mid-line... or is still writing
    assert reader.read_new() == []
    with open(path, "ab") as fh:
        fh.write(b'"t": 2.0}\n')
    assert reader.read_new() == [Done(t=2.0)]
    writer.close()


def test_a_writer_appends_unless_told_to_start_afresh(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text("old\n")
    JournalWriter(path).write_line("kept\n")
    assert path.read_text() == "old\nkept\n"
    JournalWriter(path, truncate=True).write_line("fresh\n")
    assert path.read_text() == "fresh\n"


def test_lines_from_many_threads_never_interleave(tmp_path: Path) -> None:
    writer = JournalWriter(tmp_path / "j.jsonl")
    line = "x" * 10_000 + "\n"

    def write() -> None:
        for _ in range(20):
            writer.write_line(line)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    writer.close()
    assert (tmp_path / "j.jsonl").read_text().splitlines(keepends=True) == [line] * 80
