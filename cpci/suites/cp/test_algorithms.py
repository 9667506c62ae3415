"""Every CP algorithm against single-process SDPA: output and dQ/dK/dV, after unsharding.

Axes: algorithm x world size x causal x head-tail balancing x dtype x layout x GQA. Each config
records the max abs error of each tensor as a metric (`max_abs_err_out`, ...), so drift shows up
in the results file long before it crosses a tolerance (tolerances: `cpci.cp.oracle`).
The full product would be ~400 configs; the cut below keeps every algorithm x mask x balancing x
dtype cell and covers layouts and GQA/MQA through three (two on 4 ranks) shape variants.
"""

from __future__ import annotations

import pytest

from cpci.runner import DistContext

torch = pytest.importorskip("torch")

from cpci.cp.harness import CaseSpec  # noqa: E402
from cpci.suites.cp.cases import check_algorithm  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

# (layout, query heads, kv heads): MHA, MQA, GQA.
VARIANTS = {
    "bshd-mha": ("bshd", 4, 4),
    "bshd-mqa": ("bshd", 4, 1),
    "sbhd-gqa": ("sbhd", 4, 2),
    "bshd-gqa": ("bshd", 4, 2),
    "sbhd-mqa": ("sbhd", 4, 1),
}

MASKS = [
    pytest.param(
        causal, balance, id=f"{'causal' if causal else 'full'}-{'ht' if balance else 'cont'}"
    )
    for causal in (True, False)
    for balance in (True, False)
]


def spec_for(variant: str, dtype: str, causal: bool, load_balance: bool) -> CaseSpec:
    layout, heads_q, heads_kv = VARIANTS[variant]
    return CaseSpec(
        heads_q=heads_q,
        heads_kv=heads_kv,
        dtype=DTYPES[dtype],
        layout=layout,  # type: ignore[arg-type]
        causal=causal,
        load_balance=load_balance,
    )


@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("variant", ["bshd-mha", "bshd-mqa", "sbhd-gqa"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize(("causal", "load_balance"), MASKS)
@pytest.mark.parametrize("algorithm", ["all_gather", "p2p", "a2a"])
def test_cp2(
    cpci_dist: DistContext,
    algorithm: str,
    causal: bool,
    load_balance: bool,
    dtype: str,
    variant: str,
) -> None:
    check_algorithm(cpci_dist, algorithm, spec_for(variant, dtype, causal, load_balance))


@pytest.mark.cpci(world_size=4)
@pytest.mark.parametrize("variant", ["bshd-gqa", "sbhd-mqa"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize(("causal", "load_balance"), MASKS)
def test_cp4_a2a_p2p(
    cpci_dist: DistContext, causal: bool, load_balance: bool, dtype: str, variant: str
) -> None:
    """cp 4 = a2a 2 x p2p 2."""
    check_algorithm(cpci_dist, "a2a_p2p", spec_for(variant, dtype, causal, load_balance))


@pytest.mark.cpci(world_size=4)
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize(("causal", "load_balance"), MASKS)
@pytest.mark.parametrize("algorithm", ["all_gather", "p2p", "a2a"])
def test_cp4(
    cpci_dist: DistContext, algorithm: str, causal: bool, load_balance: bool, dtype: str
) -> None:
    """Four ranks: the ring takes three hops; a2a leaves one query head per rank."""
    check_algorithm(cpci_dist, algorithm, spec_for("sbhd-gqa", dtype, causal, load_balance))
