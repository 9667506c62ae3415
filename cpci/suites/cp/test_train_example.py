"""End to end: a tiny transformer trains the same with CP = 2 as on one process (20 steps)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpci.loss import compare_losses, read_losses
from cpci.runner import DistContext

dist = pytest.importorskip("torch.distributed")

from cpci.cp.train_example import format_log, train  # noqa: E402


@pytest.mark.cpci(world_size=2)
def test_cp2_losses_match_cp1(cpci_dist: DistContext, tmp_path: Path) -> None:
    cp2 = train(20, group=dist.group.WORLD)
    cp1 = train(20, group=None)  # local, no communication: the same on every rank
    (tmp_path / "cp1.log").write_text(format_log(cp1))
    (tmp_path / "cp2.log").write_text(format_log(cp2))
    # fp32 with a different summation order: per-step losses agree to ~1e-7 relative; 1e-5
    # leaves room for 20 steps of drift and still fails on any real CP bug (which moves the
    # loss in the 2nd or 3rd digit within a few steps).
    comparison = compare_losses(
        read_losses(tmp_path / "cp1.log"), read_losses(tmp_path / "cp2.log"), rtol=1e-5
    )
    cpci_dist.record_metric("max_rel_loss_diff", comparison.summary.max_rel_diff)
    assert comparison.ok, comparison.reason
    assert cp1[-1] < 0.5 * cp1[0], "the example must actually learn, or agreement means little"
