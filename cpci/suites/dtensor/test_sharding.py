"""Sharding a sequence the way context parallelism does, checked with DTensor on every rank.

Unmodified `DTensorTestBase` tests: the harness's `rank`, `world_size`, `device_type` and its
`with_comms` process-group init and teardown are all they use.
"""

from __future__ import annotations

import pytest

pytest.importorskip("expecttest", reason="torch.testing._internal needs expecttest")

import torch
import torch.distributed as dist
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.testing._internal.common_distributed import skip_if_lt_x_gpu
from torch.testing._internal.distributed._tensor.common_dtensor import (
    DTensorTestBase,
    with_comms,
)

# Legend: B batch, H heads, S sequence, D head dim.


class SequenceShardingTest(DTensorTestBase):
    @property
    def world_size(self) -> int:
        return 2

    @with_comms
    def test_sequence_shards_reassemble_to_the_full_tensor(self) -> None:
        mesh = self.build_device_mesh()
        torch.manual_seed(0)  # every rank builds the same global tensor
        q_BHSD = torch.randn(1, 2, 8, 4, device=self.device_type)
        sharded = distribute_tensor(q_BHSD, mesh, [Shard(2)])
        assert sharded.to_local().shape == (1, 2, 8 // self.world_size, 4)
        torch.testing.assert_close(sharded.full_tensor(), q_BHSD)  # exact: a copy

    @with_comms
    def test_redistribute_shard_to_replicate_is_an_all_gather(self) -> None:
        mesh = self.build_device_mesh()
        local_S = torch.full((2,), float(self.rank), device=self.device_type)
        pieces = [torch.empty_like(local_S) for _ in range(self.world_size)]
        dist.all_gather(pieces, local_S)
        from torch.distributed.tensor import DTensor

        sharded = DTensor.from_local(local_S, mesh, [Shard(0)])
        replicated = sharded.redistribute(mesh, [Replicate()]).to_local()
        torch.testing.assert_close(replicated, torch.cat(pieces))  # exact: both are copies

    @with_comms
    def test_sharded_matmul_matches_the_single_process_result(self) -> None:
        mesh = self.build_device_mesh()
        torch.manual_seed(1)
        a = torch.randn(8, 6, device=self.device_type)
        b = torch.randn(6, 5, device=self.device_type)
        out = distribute_tensor(a, mesh, [Shard(0)]) @ distribute_tensor(b, mesh, [Replicate()])
        # Row shards multiply independently: the same kernels on the same rows, so bit-equal.
        torch.testing.assert_close(out.full_tensor(), a @ b, rtol=0, atol=0)

    @skip_if_lt_x_gpu(2)
    @with_comms
    def test_on_two_gpus(self) -> None:
        # A TEST_SKIPS exit (sys.exit(77)) on a CPU runner: reported skipped with its reason.
        assert torch.cuda.device_count() >= 2
