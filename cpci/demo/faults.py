"""Faults the demo injects into the CP suite for its "PR" commit; a pytest plugin for the ranks.

Loaded only by `cpci demo` (`-p cpci.demo.faults`, which the runner forwards to every rank) with
`CPCI_DEMO_FAULTS` naming the faults:
- `ring-balance`: past its first two ranks, the ring forgets the head-tail layout and masks as if
  chunks were contiguous, the classic CP bug: the causal, load-balanced p2p configs on 4 ranks
  fail, those on 2 ranks still pass (a regression a 2-GPU CI would miss);
- `flaky=<substring>`: the first config whose node id contains the substring fails on its first
  attempt only (a marker file in `CPCI_DEMO_DIR` remembers it), like a transient fault.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest


def _faults() -> dict[str, str]:
    out = {}
    for part in os.environ.get("CPCI_DEMO_FAULTS", "").split(","):
        name, _, value = part.partition("=")
        if name:
            out[name.strip()] = value.strip()
    return out


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
    pattern = _faults().get("flaky")
    if pattern and pattern in item.nodeid:
        import torch.distributed as dist

        marker = Path(os.environ["CPCI_DEMO_DIR"]) / "flaky-fault-fired"
        first = not marker.exists()
        dist.barrier()  # every rank has looked before rank 0 leaves the marker
        if first and dist.get_rank() == 0:
            marker.write_text(item.nodeid)
        if first:
            raise AssertionError("demo fault: fails on its first attempt only")
    return (yield)
