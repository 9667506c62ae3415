"""The agreement and the default process group survive tests that destroy and re-create it."""

from __future__ import annotations

import pytest

from tests.runner.helpers import by_nodeid, results, worlds_started

SUITE = """
import os
import pytest
import torch
import torch.distributed as dist

@pytest.mark.cpci(world_size=2)
def test_a_destroys_the_default_group(cpci_dist):
    dist.destroy_process_group()

@pytest.mark.cpci(world_size=2)
def test_b_finds_a_live_default_group(cpci_dist):
    assert dist.is_initialized()
    out = torch.ones(1)
    dist.all_reduce(out)
    assert out.item() == 2

OWN = []

@pytest.mark.cpci(world_size=2)
def test_c_makes_its_own_group_and_rank_1_fails(cpci_dist):
    dist.destroy_process_group()
    store = dist.FileStore(os.environ["SHARED_STORE"], 2)
    dist.init_process_group("gloo", store=store, rank=cpci_dist.rank, world_size=2)
    OWN.append(dist.group.WORLD)
    dist.barrier()
    assert cpci_dist.rank == 0, "rank 1 disagrees"

@pytest.mark.cpci(world_size=2)
def test_d_runs_in_cpcis_group_again(cpci_dist):
    assert OWN and dist.group.WORLD is not OWN[0]  # the config's own group was replaced
    dist.barrier()
"""


def test_a_config_that_destroys_or_replaces_the_default_group_does_not_break_the_next(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_groups=SUITE)
    monkeypatch.setenv("SHARED_STORE", str(pytester.path / "store"))
    result = pytester.runpytest_subprocess("--cpci-results=r.jsonl")
    result.assert_outcomes(passed=3, failed=1)
    assert worlds_started(result.stdout.str()) == 1  # no crash: one world ran all four
    records = by_nodeid(results(pytester.path / "r.jsonl"))
    failed = records["test_groups.py::test_c_makes_its_own_group_and_rank_1_fails"]
    assert [e["rank"] for e in failed["rank_errors"]] == [1]
    assert "rank 1 disagrees" in failed["rank_errors"][0]["message"]
