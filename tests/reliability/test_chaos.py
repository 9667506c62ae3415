"""Runner chaos at CI size: ranks SIGKILL themselves, segfault, exit or hang at seeded points.

Every config is accounted for exactly once with the outcome its fault implies, the results file
is valid JSON lines while the run goes on and after it, and no process of the run survives.
`benchmarks/reliability_chaos.py` runs the same check with 100 configs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.chaos import EXPECTED, plan_faults, run_chaos

pytest.importorskip("torch", reason="the chaos run launches torchrun worlds")

SEED = 20240801
CONFIGS = 12
FAULTS = 3


def test_the_fault_plan_is_deterministic_and_covers_every_kind_over_seeds() -> None:
    assert plan_faults(100, 20, SEED) == plan_faults(100, 20, SEED)
    assert plan_faults(100, 20, SEED) != plan_faults(100, 20, SEED + 1)
    kinds = {f.kind for seed in range(10) for f in plan_faults(100, 20, seed).values()}
    assert kinds == set(EXPECTED) - {None}


def test_chaos_run_accounts_for_every_config_once_and_leaves_no_orphan(tmp_path: Path) -> None:
    run = run_chaos(tmp_path, configs=CONFIGS, faults=FAULTS, seed=SEED, timeout_s=3)
    assert run.problems == [], "\n".join(run.problems) + "\n" + run.stdout[-3000:]
    assert run.accounted == CONFIGS
    assert run.outcomes["passed"] == CONFIGS - FAULTS
    assert run.lines_checked > 0, "the results file was read while the run went on"
    assert run.returncode == 1  # some configs failed, and pytest says so
