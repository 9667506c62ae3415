"""One entry point over the four CP algorithms, for suites, benchmarks and adapters.

Each algorithm also has its own function (`p2p_attention`, ...); this module only names them and
carries the process groups, so a test can loop over algorithms without knowing their arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from cpci.cp.a2a import a2a_attention
from cpci.cp.a2a_p2p import a2a_p2p_attention
from cpci.cp.all_gather import all_gather_attention
from cpci.cp.p2p import p2p_attention
from cpci.cp.shapes import Layout

Algorithm = Literal["all_gather", "p2p", "a2a", "a2a_p2p"]
ALGORITHMS: tuple[Algorithm, ...] = ("all_gather", "p2p", "a2a", "a2a_p2p")


@dataclass(frozen=True)
class CPGroups:
    """The process groups of one CP setup: `cp` for the flat algorithms, `a2a` and `p2p` (with
    cp = a2a x p2p) for the hierarchical one."""

    cp: Any = None
    a2a: Any = None
    p2p: Any = None


def cp_attention(
    q: Any,
    k: Any,
    v: Any,
    *,
    algorithm: str,
    groups: CPGroups,
    causal: bool,
    load_balance: bool,
    layout: Layout = "bshd",
    scale: float | None = None,
) -> Any:
    """This rank's output shard of attention over the CP group(s), by `algorithm`."""
    common: dict[str, Any] = {
        "causal": causal,
        "load_balance": load_balance,
        "layout": layout,
        "scale": scale,
    }
    if algorithm == "all_gather":
        return all_gather_attention(q, k, v, group=groups.cp, **common)
    if algorithm == "p2p":
        return p2p_attention(q, k, v, group=groups.cp, **common)
    if algorithm == "a2a":
        return a2a_attention(q, k, v, group=groups.cp, **common)
    if algorithm == "a2a_p2p":
        if groups.a2a is None or groups.p2p is None:
            raise ValueError("algorithm 'a2a_p2p' needs CPGroups(a2a=..., p2p=...)")
        return a2a_p2p_attention(q, k, v, a2a_group=groups.a2a, p2p_group=groups.p2p, **common)
    raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
