"""The SDPA backend policy is in force inside every CP attention call, forward and backward.

`cpci.cp.backend` decides (cp > 1: FLASH and EFFICIENT only, so never the cuDNN kernel that
crashed under CP); these configs show the decision is applied: inside the attention call the
backends torch may pick are exactly the policy's, and the one torch's dispatcher picks for these
inputs is among them. On a GPU the backend actually run is read from the profiler.
"""

from __future__ import annotations

from typing import Any

import pytest

from cpci.runner import DistContext

torch = pytest.importorskip("torch")

from cpci.cp import backend, cp_attention, torch_cp  # noqa: E402
from cpci.cp.harness import CaseSpec, make_inputs, reference_for, run_sharded  # noqa: E402
from cpci.cp.oracle import assert_matches  # noqa: E402
from cpci.cp.shapes import to_bhsd  # noqa: E402
from cpci.suites.cp import cases  # noqa: E402

SDPBackend = torch.nn.attention.SDPBackend


class Spy:
    """Records the backends in force at each attention call and in its backward."""

    def __init__(self, spec: CaseSpec) -> None:
        self.spec = spec
        self.forward: list[frozenset[str]] = []
        self.backward: list[frozenset[str]] = []
        self.chosen: list[str] = []

    def wrap(self, fn: Any) -> Any:
        def spied(q: Any, k: Any, v: Any, **kwargs: Any) -> Any:
            self.forward.append(backend.backends_in_force())
            q_BHSD, k_BHSD, v_BHSD = (to_bhsd(x, self.spec.layout) for x in (q, k, v))
            choice = torch._fused_sdp_choice(q_BHSD, k_BHSD, v_BHSD, is_causal=self.spec.causal)
            self.chosen.append(SDPBackend(choice).name)
            out = fn(q, k, v, **kwargs)
            out.register_hook(lambda grad: self.backward.append(backend.backends_in_force()))
            return out

        return spied


def policy_backends(spec: CaseSpec, ctx: DistContext) -> frozenset[str]:
    request = backend.AttentionRequest(
        device=torch.device(ctx.device).type,
        cp_size=ctx.world_size,
        training=True,
        head_dim_qk=spec.head_dim,
        head_dim_v=spec.head_dim,
        dtype=spec.dtype,
    )
    return frozenset(backend.choose_backends(request).backends)


@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("algorithm", ["all_gather", "p2p", "a2a"])
def test_policy_in_force_in_each_algorithm(
    cpci_dist: DistContext, monkeypatch: pytest.MonkeyPatch, algorithm: str, dtype: str
) -> None:
    spec = CaseSpec(dtype={"fp32": torch.float32, "bf16": torch.bfloat16}[dtype])
    spy = Spy(spec)
    monkeypatch.setattr(cases, "cp_attention", spy.wrap(cp_attention))
    before = backend.backends_in_force()
    results, reference = cases.run_algorithm(cpci_dist, algorithm, spec)
    allowed = policy_backends(spec, cpci_dist)
    assert "CUDNN_ATTENTION" not in allowed
    assert "MATH" not in allowed
    assert spy.forward == [allowed]
    assert spy.backward == [allowed]
    assert set(spy.chosen) <= allowed, f"torch would pick {spy.chosen} under {sorted(allowed)}"
    assert backend.backends_in_force() == before, "the policy must not outlive the config"
    assert_matches(results, reference, spec.dtype)


@pytest.mark.cpci(world_size=2)
def test_torch_cp_runs_an_allowed_kernel_on_gpu(cpci_dist: DistContext) -> None:
    """The kernel torch's ring actually launched (profiled), for bf16 where cuDNN is eligible."""
    spec = CaseSpec(dtype=torch.bfloat16, head_dim=64, seq=128, causal=True, load_balance=True)
    reason = torch_cp.why_not(spec, cpci_dist.device)
    if reason is not None:
        pytest.skip(reason)
    prepared = torch_cp.prepare(spec, None)
    inputs = make_inputs(spec, device=cpci_dist.device)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
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
    ops = {event.name for event in profile.events() if "scaled_dot_product" in event.name}
    assert not any("cudnn" in op for op in ops), ops
    assert any("flash" in op or "efficient" in op for op in ops), ops
    assert_matches(results, reference_for(spec, inputs), spec.dtype)
