"""Other CP stacks (PyTorch's, TransformerEngine's) against the same SDPA oracle.

Skipped, with the adapter's reason, wherever a stack cannot run (on CPU: all of them). What of
PyTorch's CP runs on CPU, its head-tail sharding, is checked against ours here too.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from cpci.runner import DistContext

torch = pytest.importorskip("torch")

from cpci.cp import CPGroups, cp_attention, torch_cp  # noqa: E402
from cpci.cp.adapters import ADAPTERS  # noqa: E402
from cpci.cp.balancer import SequenceBalancer  # noqa: E402
from cpci.cp.harness import CaseSpec, make_inputs, reference_for, run_sharded  # noqa: E402
from cpci.cp.oracle import assert_matches, max_abs_errors  # noqa: E402
from cpci.cp.shapes import seq_dim  # noqa: E402


@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize(("causal", "load_balance"), [(True, True), (False, False)])
@pytest.mark.parametrize("adapter", list(ADAPTERS))
def test_adapter_matches_oracle(
    cpci_dist: DistContext, adapter: str, causal: bool, load_balance: bool
) -> None:
    spec = CaseSpec(
        dtype=torch.bfloat16,
        causal=causal,
        load_balance=load_balance,
        head_dim=64,  # the smallest head dim every fused kernel takes
        seq=128,
    )
    reason = ADAPTERS[adapter].why_not(spec, cpci_dist.device)
    if reason is not None:
        pytest.skip(reason)
    prepared = ADAPTERS[adapter].prepare(spec, None)
    inputs = make_inputs(spec, device=cpci_dist.device)
    results = run_sharded(
        spec,
        inputs,
        prepared.fn,
        rank=cpci_dist.rank,
        cp_size=cpci_dist.world_size,
        group=None,
        around=prepared.around,
        shard=prepared.shard,
    )
    reference = reference_for(spec, inputs)
    for name, err in max_abs_errors(results, reference).items():
        cpci_dist.record_metric(f"max_abs_err_{name}", err)
    assert_matches(results, reference, spec.dtype)


@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("layout", ["bshd", "sbhd"])
@pytest.mark.parametrize("load_balance", [True, False], ids=["ht", "cont"])
def test_torch_cp_shards_like_our_balancer(
    cpci_dist: DistContext, layout: str, load_balance: bool
) -> None:
    """`_context_parallel_shard` (+ `_HeadTailLoadBalancer`) cuts what `SequenceBalancer` cuts.

    The torch_cp adapter shards with torch and unshards with ours; this is why that is sound,
    and it runs on CPU, where torch's ring itself cannot.
    """
    api = torch_cp.load()
    if isinstance(api, str):
        pytest.skip(api)
    spec = CaseSpec(seq=16, layout=layout, load_balance=load_balance)  # type: ignore[arg-type]
    inputs = make_inputs(spec, device=cpci_dist.device)
    mesh = torch_cp.mesh_for(None, cpci_dist.device)
    dim = seq_dim(spec.layout)
    ours = SequenceBalancer(spec.seq, cpci_dist.world_size, head_tail=load_balance)
    theirs = torch_cp.sharder(api, spec, mesh, cpci_dist.device)([inputs.q, inputs.dout], dim)
    for full, shard in zip([inputs.q, inputs.dout], theirs, strict=True):
        torch.testing.assert_close(shard, ours.shard(full, dim, cpci_dist.rank), rtol=0, atol=0)


@pytest.mark.cpci(world_size=2)
def test_torch_cp_shards_feed_our_ring(cpci_dist: DistContext) -> None:
    """Inputs cut by torch (`_context_parallel_shard` + head-tail) through our ring pass the
    oracle; cut without the balancer, the same ring fails it: the harness's unshard would
    catch a stack whose layout is not ours."""
    api = torch_cp.load()
    if isinstance(api, str):
        pytest.skip(api)
    spec = CaseSpec(causal=True, load_balance=True)
    inputs = make_inputs(spec, device=cpci_dist.device)
    mesh = torch_cp.mesh_for(None, cpci_dist.device)

    def ring(q: Any, k: Any, v: Any) -> Any:
        return cp_attention(
            q, k, v, algorithm="p2p", groups=CPGroups(), causal=True, load_balance=True
        )

    def run(shard_spec: CaseSpec) -> dict[str, Any]:
        shard = torch_cp.sharder(api, shard_spec, mesh, cpci_dist.device)
        return run_sharded(
            spec, inputs, ring, rank=cpci_dist.rank, cp_size=2, group=None, shard=shard
        )

    reference = reference_for(spec, inputs)
    assert_matches(run(spec), reference, spec.dtype)
    contiguous = run(replace(spec, load_balance=False))
    with pytest.raises(AssertionError, match="differs from the SDPA reference"):
        assert_matches(contiguous, reference, spec.dtype)
