"""Collectives checked against values computed by hand, on every rank of the world."""

from __future__ import annotations

import pytest

from cpci.runner import DistContext

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")


@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("numel", [1, 7, 1024])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_all_reduce_sum(cpci_dist: DistContext, numel: int, dtype: str) -> None:
    tensor = torch.full((numel,), cpci_dist.rank + 1, dtype=getattr(torch, dtype))
    dist.all_reduce(tensor)
    expected = sum(range(1, cpci_dist.world_size + 1))
    assert torch.all(tensor == expected)


@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("root", [0, 1])
def test_broadcast(cpci_dist: DistContext, root: int) -> None:
    tensor = torch.arange(8.0) if cpci_dist.rank == root else torch.zeros(8)
    dist.broadcast(tensor, src=root)
    torch.testing.assert_close(tensor, torch.arange(8.0))


@pytest.mark.cpci(world_size=4)
@pytest.mark.parametrize("group_ranks", [[0, 1], [2, 3], [0, 2]])
def test_subgroup_all_gather(cpci_dist: DistContext, group_ranks: list[int]) -> None:
    group = cpci_dist.new_group(group_ranks)  # every rank creates it; destroyed after the config
    if cpci_dist.rank not in group_ranks:
        return
    out = [torch.zeros(1) for _ in group_ranks]
    dist.all_gather(out, torch.tensor([float(cpci_dist.rank)]), group=group)
    assert [t.item() for t in out] == [float(r) for r in group_ranks]


@pytest.mark.cpci(world_size=2)
def test_ring_exchange(cpci_dist: DistContext) -> None:
    rank, size = cpci_dist.rank, cpci_dist.world_size
    send = torch.tensor([float(rank)])
    recv = torch.zeros(1)
    ops = [
        dist.P2POp(dist.isend, send, (rank + 1) % size),
        dist.P2POp(dist.irecv, recv, (rank - 1) % size),
    ]
    for request in dist.batch_isend_irecv(ops):
        request.wait()
    assert recv.item() == float((rank - 1) % size)
    cpci_dist.record_metric("ring_value", recv.item())
