"""The checks can fail: deliberately broken algorithms are caught, bad shapes are refused.

A suite that passes whatever the code does proves nothing; each test here breaks one piece the
way real CP bugs do and asserts that the SDPA comparison catches it.
"""

from __future__ import annotations

from typing import Any

import pytest

from cpci.runner import DistContext

torch = pytest.importorskip("torch")

from cpci.cp import a2a_attention, all_gather, p2p  # noqa: E402
from cpci.cp.harness import CaseSpec  # noqa: E402
from cpci.cp.oracle import TOLERANCES, assert_matches, max_abs_errors  # noqa: E402
from cpci.suites.cp.cases import run_algorithm  # noqa: E402

SPEC = CaseSpec(causal=True, load_balance=True)


def assert_caught(ctx: DistContext, algorithm: str, spec: CaseSpec = SPEC) -> None:
    results, reference = run_algorithm(ctx, algorithm, spec)
    errors = max_abs_errors(results, reference)
    assert max(errors.values()) > 10 * TOLERANCES[spec.dtype].atol, errors
    with pytest.raises(AssertionError, match="differs from the SDPA reference"):
        assert_matches(results, reference, spec.dtype)


def _merge_ignoring_lse(out_a: Any, lse_a: Any, out_b: Any, lse_b: Any) -> tuple[Any, Any]:
    """A plausible bug: average the partial outputs instead of weighting them by their mass."""
    both = torch.isfinite(lse_a).unsqueeze(-1)
    out = torch.where(both, (out_a + out_b) / 2, out_b)
    return out, torch.logaddexp(lse_a, lse_b)


@pytest.mark.cpci(world_size=2)
def test_wrong_merge_is_caught(cpci_dist: DistContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(p2p, "merge_partials", _merge_ignoring_lse)
    assert_caught(cpci_dist, "p2p")


@pytest.mark.cpci(world_size=2)
def test_ring_mask_ignoring_balancing_is_caught(
    cpci_dist: DistContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ring masks head-tail data as if it were contiguous."""
    real = p2p.ring_step

    def contiguous_plan(rank: int, src: int, *, causal: bool, load_balance: bool) -> Any:
        return real(rank, src, causal=causal, load_balance=False)

    monkeypatch.setattr(p2p, "ring_step", contiguous_plan)
    assert_caught(cpci_dist, "p2p")


@pytest.mark.cpci(world_size=2)
def test_off_by_one_causal_mask_is_caught(
    cpci_dist: DistContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each query also sees the next token."""
    monkeypatch.setattr(all_gather, "causal_mask", lambda q, k: k[None, :] <= q[:, None] + 1)
    assert_caught(cpci_dist, "all_gather")


@pytest.mark.cpci(world_size=2)
def test_a2a_refuses_indivisible_heads(cpci_dist: DistContext) -> None:
    q, k, v = (torch.randn(1, 8, 3, 8) for _ in range(3))
    with pytest.raises(ValueError, match=r"query heads \(3\) must be divisible by the a2a size 2"):
        a2a_attention(q, k, v, group=None, causal=True, load_balance=True)
