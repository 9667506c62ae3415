"""Helpers for the runner's end-to-end tests: real pytest processes that launch torchrun worlds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest


def results(path: Path) -> list[dict[str, Any]]:
    """The records of a results file, in the order they were written."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def by_nodeid(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The last record per node id (reruns come after first attempts)."""
    return {r["nodeid"]: r for r in records}


def worlds_started(stdout: str) -> int:
    """The number of worlds from the closing summary line."""
    for line in stdout.splitlines():
        if "world(s) started" in line:
            return int(line.split()[0])
    raise AssertionError(f"no cpci summary in output:\n{stdout}")


def run_pytest(
    path: Path,
    *args: str,
    env: dict[str, str] | None = None,
    unset: tuple[str, ...] = (),
    timeout: float = 300,
) -> pytest.RunResult:
    """Run pytest in `path` as a real subprocess (for module-scoped runs pytester cannot share),
    in this environment plus `env`, less the variables named in `unset`."""
    start = time.monotonic()
    environ = {k: v for k, v in os.environ.items() if k not in unset}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=path,
        env={**environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return pytest.RunResult(
        proc.returncode,
        proc.stdout.splitlines(),
        proc.stderr.splitlines(),
        time.monotonic() - start,
    )


#: Suite source (pasted into a written test file): rank 1 segfaults; rank 0, as NCCL's ranks do
#: after a peer died, waits for it to be gone, logs "remote process exited" and exits 1 itself.
#: The survivor's message is what must never be taken for the cause.
RANK1_SEGFAULTS = """
def rank1_segfaults_then_rank0_echoes(cpci_dist):
    import os, signal, sys, time
    import torch.distributed as dist

    pids = [None, None]
    dist.all_gather_object(pids, os.getpid())
    if cpci_dist.rank == 1:
        os.kill(os.getpid(), signal.SIGSEGV)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # rank 0 ends on its own, as NCCL's does
    while True:
        try:
            os.kill(pids[1], 0)
        except ProcessLookupError:
            break
        time.sleep(0.01)
    print("NCCL error: remote process exited or there was a network error", file=sys.stderr)
    sys.stderr.flush()
    os._exit(1)
"""
