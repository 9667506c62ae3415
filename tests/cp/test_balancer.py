"""Token layouts: which chunks each rank holds, and that shard/restore are inverse."""

from __future__ import annotations

import pytest

from tests.prerequisites import import_or_skip

torch = import_or_skip("torch", "torch", "the CP reference runs on torch")

from cpci.cp.balancer import SequenceBalancer  # noqa: E402


def test_head_tail_chunks() -> None:
    balancer = SequenceBalancer(16, 4, head_tail=True)
    assert [balancer.chunk_ids(r) for r in range(4)] == [(0, 7), (1, 6), (2, 5), (3, 4)]
    assert balancer.positions(1).tolist() == [2, 3, 12, 13]


def test_contiguous_chunks() -> None:
    balancer = SequenceBalancer(12, 3, head_tail=False)
    assert [balancer.positions(r).tolist() for r in range(3)] == [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
        [8, 9, 10, 11],
    ]


@pytest.mark.parametrize("head_tail", [True, False])
@pytest.mark.parametrize(("seq", "cp"), [(8, 2), (16, 4), (24, 3), (4, 1)])
def test_shard_then_restore_is_identity(seq: int, cp: int, head_tail: bool) -> None:
    balancer = SequenceBalancer(seq, cp, head_tail=head_tail)
    x = torch.randn(2, seq, 3)
    shards = [balancer.shard(x, 1, r) for r in range(cp)]
    assert all(s.shape[1] == balancer.local_len for s in shards)
    torch.testing.assert_close(balancer.restore(torch.cat(shards, 1), 1), x, rtol=0, atol=0)
    assert sorted(balancer.shard_indices().tolist()) == list(range(seq))
    assert torch.equal(balancer.shard_indices()[balancer.restore_indices()], torch.arange(seq))


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_head_tail_balances_causal_work(cp: int) -> None:
    """Causal work of a token = its position + 1 keys; head-tail makes it equal per rank."""
    seq = 16 * cp
    work = {
        ht: [
            int((SequenceBalancer(seq, cp, head_tail=ht).positions(r) + 1).sum()) for r in range(cp)
        ]
        for ht in (True, False)
    }
    assert max(work[True]) == min(work[True])
    assert max(work[False]) / min(work[False]) > 2


@pytest.mark.parametrize(
    ("seq", "cp", "head_tail", "message"),
    [
        (10, 4, True, "multiple of 2\\*cp = 8 \\(head-tail layout\\), got 10"),
        (10, 4, False, "multiple of cp = 4 \\(contiguous layout\\), got 10"),
        (8, 0, True, "cp size must be >= 1, got 0"),
    ],
)
def test_bad_layout(seq: int, cp: int, head_tail: bool, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SequenceBalancer(seq, cp, head_tail=head_tail)


def test_bad_rank_and_length() -> None:
    balancer = SequenceBalancer(8, 2)
    with pytest.raises(ValueError, match="rank must be in \\[0, 2\\), got 2"):
        balancer.positions(2)
    with pytest.raises(ValueError, match="tensor has 6 tokens along dim 0, balancer expects 8"):
        balancer.shard(torch.zeros(6), 0, 0)
