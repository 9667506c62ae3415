"""Running one CP config in a suite: groups, inputs, the CP call and the oracle comparison."""

from __future__ import annotations

from typing import Any

from cpci.cp import CPGroups, cp_attention, hierarchical_groups
from cpci.cp.harness import CaseSpec, make_inputs, reference_for, run_sharded
from cpci.cp.oracle import assert_matches, max_abs_errors
from cpci.runner import DistContext


def groups_for(algorithm: str, ctx: DistContext) -> CPGroups:
    """The world as the CP group; for a2a+p2p, a2a groups of 2 and a ring across them."""
    if algorithm != "a2a_p2p":
        return CPGroups(cp=None)
    a2a, p2p = hierarchical_groups(
        2, rank=ctx.rank, ranks=list(range(ctx.world_size)), new_group=ctx.new_group
    )
    return CPGroups(a2a=a2a, p2p=p2p)


def run_algorithm(ctx: DistContext, algorithm: str, spec: CaseSpec) -> tuple[dict[str, Any], Any]:
    """One config on every rank: (unsharded CP results, SDPA reference); no assert yet."""
    groups = groups_for(algorithm, ctx)
    inputs = make_inputs(spec, device=ctx.device)

    def fn(q: Any, k: Any, v: Any) -> Any:
        return cp_attention(
            q,
            k,
            v,
            algorithm=algorithm,
            groups=groups,
            causal=spec.causal,
            load_balance=spec.load_balance,
            layout=spec.layout,
        )

    results = run_sharded(spec, inputs, fn, rank=ctx.rank, cp_size=ctx.world_size, group=None)
    return results, reference_for(spec, inputs)


def check_algorithm(ctx: DistContext, algorithm: str, spec: CaseSpec) -> None:
    """Run, record each tensor's max abs error, then assert (no collective left to hang)."""
    results, reference = run_algorithm(ctx, algorithm, spec)
    for name, err in max_abs_errors(results, reference).items():
        ctx.record_metric(f"max_abs_err_{name}", err)
    assert_matches(results, reference, spec.dtype)
