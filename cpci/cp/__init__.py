"""Context-parallel attention in plain PyTorch: an oracle for CP stacks, runnable on gloo/CPU.

One module per algorithm (`all_gather`, `p2p`, `a2a`, `a2a_p2p`), all built from the attention
block in `kernel` and the token layout in `balancer`; `oracle` holds the single-process
reference and the tolerances, `backend` the SDPA backend policy (in force around every CP call
that `harness` runs), `adapters` and `torch_cp` the other stacks checked the same way, and
`train_example` a tiny CP training for `cpci loss-compare`.
"""

from cpci.cp.a2a import a2a_attention
from cpci.cp.a2a_p2p import a2a_p2p_attention, hierarchical_groups
from cpci.cp.all_gather import all_gather_attention
from cpci.cp.attention import ALGORITHMS, CPGroups, cp_attention
from cpci.cp.balancer import SequenceBalancer
from cpci.cp.p2p import p2p_attention
from cpci.cp.shapes import LAYOUTS, Layout

__all__ = [
    "ALGORITHMS",
    "LAYOUTS",
    "CPGroups",
    "Layout",
    "SequenceBalancer",
    "a2a_attention",
    "a2a_p2p_attention",
    "all_gather_attention",
    "cp_attention",
    "hierarchical_groups",
    "p2p_attention",
]
