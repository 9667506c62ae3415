"""Deterministic shards for CI matrices, balanced by recorded durations.

Every shard job computes the same assignment from the same inputs (the collected node ids and
the durations file), so the shards are disjoint and together cover every test exactly once.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

#: Weight of a test with no recorded duration when nothing at all is recorded: shard by count.
_UNKNOWN = 1.0


def assign(nodeids: list[str], durations: dict[str, float], total: int) -> dict[str, int]:
    """Greedy least-loaded packing, longest first; unknown tests weigh the median known one."""
    known = [durations[n] for n in nodeids if n in durations]
    fallback = statistics.median(known) if known else _UNKNOWN
    weights = {n: durations.get(n, fallback) for n in nodeids}
    loads = [0.0] * total
    out: dict[str, int] = {}
    for nodeid in sorted(nodeids, key=lambda n: (-weights[n], n)):
        shard = min(range(total), key=lambda s: (loads[s], s))
        out[nodeid] = shard
        loads[shard] += weights[nodeid]
    return out


def load(path: Path) -> dict[str, float]:
    """Recorded durations; a missing file means none recorded yet."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise ValueError(f"{path}: not a durations file ({exc}); delete it to start over") from exc
    return {str(k): float(v) for k, v in data.items()}


def save(path: Path, durations: dict[str, float]) -> None:
    """Write atomically, so a killed run never leaves a half-written file behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(dict(sorted(durations.items())), indent=0))
    tmp.replace(path)
