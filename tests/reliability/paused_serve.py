"""`cpci serve`, paused in the middle of storing an upload, so that a test can kill it there.

`python -m tests.reliability.paused_serve FIFO` serves as `cpci serve` does, except that an
upload, once its shard's rows are written in the write transaction (`ingest_shard` returned)
and before that transaction commits, says `PAUSED` on stderr and through the FIFO, and then
waits for the SIGKILL. The test's side (`tests.reliability.service.StorePause`) blocks reading
the FIFO: its read returning is the event that the store is half done, not a guess in seconds.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from cpci.cli import main
from cpci.server.crud import uploads
from cpci.server.crud.ingest import Ingested, ingest_shard

PAUSED = "paused: the shard's rows are written, its transaction not committed"


def arm(fifo: Path) -> None:
    """Pause every upload's store after its rows are written (the service is killed there)."""

    def ingest_then_pause(**arguments: Any) -> Ingested:
        done = ingest_shard(**arguments)
        print(PAUSED, file=sys.stderr, flush=True)
        with fifo.open("w", encoding="utf-8") as event:
            event.write(PAUSED + "\n")
        threading.Event().wait()  # until the SIGKILL: the transaction never commits
        return done

    pytest.MonkeyPatch().setattr(uploads, "ingest_shard", ingest_then_pause)


if __name__ == "__main__":
    arm(Path(sys.argv[1]))
    sys.exit(main(["serve"]))
