"""Other CP stacks (PyTorch's, TransformerEngine's) against the same SDPA oracle.

Skipped, with the adapter's reason, wherever a stack cannot run (on CPU: all of them).
"""

from __future__ import annotations

import pytest

from cpci.runner import DistContext

torch = pytest.importorskip("torch")

from cpci.cp.adapters import ADAPTERS  # noqa: E402
from cpci.cp.harness import CaseSpec, make_inputs, reference_for, run_sharded  # noqa: E402
from cpci.cp.oracle import assert_matches, max_abs_errors  # noqa: E402


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
    )
    reference = reference_for(spec, inputs)
    for name, err in max_abs_errors(results, reference).items():
        cpci_dist.record_metric(f"max_abs_err_{name}", err)
    assert_matches(results, reference, spec.dtype)
