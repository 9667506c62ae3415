"""Journals: each line durable when written; a reader never sees half a line."""

from __future__ import annotations

from pathlib import Path

from cpci.runner.journal import JournalReader, JournalWriter


def test_reader_returns_only_new_complete_lines(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    reader = JournalReader(path)
    assert reader.read_new() == []  # no file yet
    writer = JournalWriter(path)
    writer.write({"ev": "begin", "i": 0})
    assert reader.read_new() == [{"ev": "begin", "i": 0}]
    with open(path, "ab") as fh:
        fh.write(b'{"ev": "end", "i"')  # a writer died mid-line... or is still writing
    assert reader.read_new() == []
    with open(path, "ab") as fh:
        fh.write(b": 0}\n")
    assert reader.read_new() == [{"ev": "end", "i": 0}]
    writer.close()
