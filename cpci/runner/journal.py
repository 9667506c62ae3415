"""Append-only JSON-lines files that survive the process writing them.

Ranks journal what they do ("begin"/"end" per config) and rank 0 appends each agreed outcome;
the parent tails those files. Every line is flushed and fsynced before the writer moves on, so
after a crash, a SIGKILL or a hang the parent knows exactly which config was in flight. Nothing
here goes through stdout, which libraries (NCCL banners, warnings) are free to scribble on.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class JournalWriter:
    """Appends one JSON object per line and makes it durable before returning."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, event: dict[str, Any]) -> None:
        data = (json.dumps(event, separators=(",", ":")) + "\n").encode()
        # One write() per line with O_APPEND: concurrent writers never interleave within a line.
        os.write(self._fd, data)
        os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)


class JournalReader:
    """Returns the complete lines appended since the last call (a torn last line waits)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._pending = b""

    def read_new(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        data = self._pending + chunk
        *lines, self._pending = data.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]
