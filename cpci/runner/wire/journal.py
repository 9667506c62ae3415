"""Append-only JSON-lines files that survive the process writing them.

Ranks journal what they do ("begin"/"end" per config), rank 0 appends each agreed outcome, and
the parent appends each config's results line; the parent tails the world's files. Every line is
flushed and fsynced before the writer moves on, so after a crash, a SIGKILL or a hang the parent
knows exactly which config was in flight, and a killed run keeps every result it had. Nothing
here goes through stdout, which libraries (NCCL banners, warnings) are free to scribble on.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel

T = TypeVar("T")


class JournalWriter:
    """Appends one line at a time and makes it durable before returning (thread-safe)."""

    def __init__(self, path: Path, *, truncate: bool = False) -> None:
        self.path = path
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (os.O_TRUNC if truncate else 0)
        self._fd = os.open(path, flags, 0o644)
        self._lock = threading.Lock()

    def write(self, record: BaseModel) -> None:
        """Append a typed record as one compact JSON line."""
        self.write_line(record.model_dump_json() + "\n")

    def write_line(self, line: str) -> None:
        """Append `line`, which must be one JSON document ending in a newline."""
        data = line.encode()
        with self._lock:
            # One write() per line with O_APPEND: concurrent writers never interleave in a line.
            os.write(self._fd, data)
            os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)


class JournalReader(Generic[T]):
    """Returns the complete lines appended since the last call, parsed (a torn last line waits)."""

    def __init__(self, path: Path, parse: Callable[[bytes], T]) -> None:
        self.path = path
        self._parse = parse
        self._offset = 0
        self._pending = b""

    def read_new(self) -> list[T]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        data = self._pending + chunk
        *lines, self._pending = data.split(b"\n")
        return [self._parse(line) for line in lines if line.strip()]
