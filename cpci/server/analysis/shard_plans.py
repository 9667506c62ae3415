"""Which shards of a run were planned from different inputs, from their uploaded plan hashes.

Every shard of one run and leg shares out the same collected configs by the same durations; a
shard whose plan hash differs computed another plan, so the run's shards may miss a config or
hold one twice. Shards without a hash (older runners, uploads without a plan file) say nothing
and are never flagged.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from cpci.schema import PlanMismatch

#: (matrix leg, shard index, plan hash or None) of each shard's latest upload.
PlannedShard = tuple[str, int, str | None]


def plan_mismatches(shards: Iterable[PlannedShard], shard_total: int) -> list[PlanMismatch]:
    """One mismatch per leg whose hashed shards disagree, its groups largest first."""
    by_leg: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for leg, index, plan_hash in shards:
        if plan_hash is not None:
            by_leg[leg][plan_hash].append(index)
    out = []
    for leg, groups in sorted(by_leg.items()):
        if len(groups) < 2:
            continue
        ordered = sorted((sorted(g) for g in groups.values()), key=lambda g: (-len(g), g[0]))
        out.append(PlanMismatch(leg=leg, shard_total=shard_total, groups=ordered))
    return out
