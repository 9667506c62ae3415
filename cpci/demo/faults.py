"""Faults the demo injects into the CP suite at some of its commits; a pytest plugin for the ranks.

Loaded only by `cpci demo` (`-p cpci.demo.faults`, which the runner forwards to every rank) with
`CPCI_DEMO_FAULTS` naming the faults of the commit being run:
- `ring-balance`: past its first two ranks, the ring forgets the head-tail layout and masks as if
  chunks were contiguous, the classic CP bug: the causal, load-balanced p2p configs on 4 ranks
  fail, those on 2 ranks still pass (a regression a 2-GPU CI would miss);
- `flaky=<substring>`: the first config whose node id contains the substring fails on its first
  attempt only (a marker file in `CPCI_DEMO_DIR`, one folder per commit, remembers it), like a
  transient fault: the runner's rerun passes, same-commit evidence of flakiness;
- `slow=<substring>`: those configs take `SLOW_S` longer on every rank (a duration that moves).

Every fault changes what the real suite does when it runs; no result is made up.
"""

from __future__ import annotations

import os
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

#: Seconds the `slow` fault adds: visible on the config's page, cheap for the demo.
SLOW_S = 0.5


def _faults() -> dict[str, str]:
    out = {}
    for part in os.environ.get("CPCI_DEMO_FAULTS", "").split(","):
        name, _, value = part.partition("=")
        if name:
            out[name.strip()] = value.strip()
    return out


def _hits(faults: dict[str, str], name: str, item: pytest.Item) -> bool:
    pattern = faults.get(name, "")
    return bool(pattern) and pattern in item.nodeid


def pytest_configure(config: pytest.Config) -> None:
    if "ring-balance" not in _faults():
        return
    from cpci.cp import p2p

    original = p2p.ring_step

    def forgets_balance(rank: int, src: int, *, causal: bool, load_balance: bool) -> Any:
        balanced = load_balance and max(rank, src) < 2
        return original(rank, src, causal=causal, load_balance=balanced)

    p2p.ring_step = forgets_balance


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    faults = _faults()
    if _hits(faults, "slow", item):
        time.sleep(SLOW_S)  # the fault is the delay itself, not a wait for anything
    if _hits(faults, "flaky", item):
        import torch.distributed as dist

        marker = Path(os.environ["CPCI_DEMO_DIR"]) / "flaky-fault-fired"
        first = not marker.exists()
        dist.barrier()  # every rank has looked before rank 0 leaves the marker
        if first and dist.get_rank() == 0:
            marker.write_text(item.nodeid)
        if first:
            raise AssertionError("demo fault: fails on its first attempt only")
    return (yield)
