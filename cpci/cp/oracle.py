"""The single-process reference every CP result is checked against, and the tolerances.

The reference is `F.scaled_dot_product_attention` on the full sequence, in fp32, from the same
(dtype-rounded) inputs the CP run got: the only differences left are CP's own arithmetic and the
final rounding of its results to the input dtype.

Legend: B batch, S full sequence, H heads, D head dim (tensors in the user's layout).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from cpci.cp.shapes import Layout, from_bhsd, to_bhsd

TENSORS = ("out", "dq", "dk", "dv")


@dataclass(frozen=True)
class Tolerance:
    """`torch.testing.assert_close` bounds for results in one dtype, checked against fp32."""

    atol: float
    rtol: float


# Values are O(1) (unit-normal inputs, softmax-weighted sums). CP computes in fp32 and rounds
# each result once to the input dtype, so the error budget is that rounding plus fp32 reordering.
TOLERANCES: dict[Any, Tolerance] = {
    # fp32: only summation order differs from SDPA (online softmax, ring accumulation): ~1e-6.
    torch.float32: Tolerance(atol=1e-5, rtol=1e-5),
    # bf16 keeps 8 significant bits: one rounding is up to 2^-9 relative (~2e-3 on O(1) values);
    # 1e-2 allows a few ulps for results near 2-4 (gradients) without hiding a wrong mask
    # (which moves results by O(0.1)).
    torch.bfloat16: Tolerance(atol=1e-2, rtol=1e-2),
    # fp16 keeps 11 significant bits: one rounding is up to 2^-12 relative (~2.5e-4); 2e-3 is
    # the same few-ulps margin.
    torch.float16: Tolerance(atol=2e-3, rtol=2e-3),
}


@dataclass(frozen=True)
class Reference:
    """Full-sequence results in fp32, in the caller's layout."""

    out: Any
    dq: Any
    dk: Any
    dv: Any


def reference_attention(
    q: Any, k: Any, v: Any, dout: Any, *, causal: bool, layout: Layout, scale: float | None = None
) -> Reference:
    """SDPA forward and backward on the full sequence in fp32 (GQA through `enable_gqa`)."""
    q_BHSD, k_BHSD, v_BHSD = (
        to_bhsd(x.detach().float(), layout).requires_grad_() for x in (q, k, v)
    )
    gqa = q_BHSD.shape[1] != k_BHSD.shape[1]
    out_BHSD = F.scaled_dot_product_attention(
        q_BHSD, k_BHSD, v_BHSD, is_causal=causal, scale=scale, enable_gqa=gqa
    )
    out_BHSD.backward(to_bhsd(dout.float(), layout))
    return Reference(
        out=from_bhsd(out_BHSD.detach(), layout),
        dq=from_bhsd(q_BHSD.grad, layout),
        dk=from_bhsd(k_BHSD.grad, layout),
        dv=from_bhsd(v_BHSD.grad, layout),
    )


def max_abs_errors(results: dict[str, Any], reference: Reference) -> dict[str, float]:
    """Max abs error per tensor ("out", "dq", "dk", "dv") of `results` against the reference."""
    return {
        name: float((results[name].float() - getattr(reference, name)).abs().max())
        for name in TENSORS
    }


def assert_matches(results: dict[str, Any], reference: Reference, dtype: Any) -> None:
    """AssertionError naming the first tensor outside the tolerance of `dtype`."""
    tol = TOLERANCES[dtype]
    for name in TENSORS:
        torch.testing.assert_close(
            results[name].float(),
            getattr(reference, name),
            atol=tol.atol,
            rtol=tol.rtol,
            msg=lambda m, name=name: f"{name} differs from the SDPA reference ({dtype}): {m}",
        )
