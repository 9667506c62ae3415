"""Deterministic shards for CI matrices, balanced by recorded durations.

Every shard job computes the same assignment from the same inputs (the collected node ids and
the durations file), so the shards are disjoint and together cover every test exactly once. Each
shard hashes those inputs (`plan_hash`) and writes the hash beside its results, so the service
can tell when shards of one run were planned from different inputs (their union may then miss a
config or hold one twice).
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from pathlib import Path

from pydantic import ValidationError

from cpci.schema import DURATIONS_SCHEMA, ConfigDurations, ShardPlan

#: The packing below, versioned: a change to it changes every plan, so it is part of the hash.
ALGORITHM = "cpci.shard/1"
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


def plan_hash(nodeids: list[str], durations: dict[str, float], total: int) -> str:
    """SHA-256 of everything `assign` decides from: two shards with the same hash computed the
    same plan. Only the durations of `nodeids` count (no other duration changes the plan)."""
    inputs = {
        "algorithm": ALGORITHM,
        "total": total,
        "nodeids": sorted(nodeids),
        "durations": {n: durations[n] for n in sorted(nodeids) if n in durations},
    }
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def shard_plan(
    nodeids: list[str], durations: dict[str, float], shard: tuple[int, int], durations_from: str
) -> ShardPlan:
    """This shard's plan record: which shard, and the hash of what every shard plans from."""
    index, total = shard
    return ShardPlan(
        shard_index=index,
        shard_total=total,
        plan_hash=plan_hash(nodeids, durations, total),
        configs=len(nodeids),
        durations_from=durations_from,
    )


def write_plan(path: Path, plan: ShardPlan) -> None:
    """Write the plan beside the results file, where `cpci upload` and the Action find it."""
    _write_atomically(path, plan.model_dump_json(by_alias=True, indent=1))


def load(path: Path) -> dict[str, float]:
    """Recorded durations; a missing file means none recorded yet."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    try:
        return parse(text)
    except ValueError as exc:
        raise ValueError(f"{path}: not a durations file ({exc}); delete it to start over") from exc


def parse(text: str) -> dict[str, float]:
    """Durations from a `cpci.durations/1` document (the service's answer) or from a plain
    `{node id: seconds}` mapping (what `save` writes); ValueError for anything else."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object of node id -> seconds")
    if data.get("schema") == DURATIONS_SCHEMA:
        try:
            return dict(ConfigDurations.model_validate(data).durations)
        except ValidationError as exc:
            raise ValueError(f"not a valid {DURATIONS_SCHEMA} document: {exc}") from None
    try:
        durations = {str(k): float(v) for k, v in data.items()}
    except (TypeError, ValueError) as exc:
        raise ValueError(f"expected node id -> seconds ({exc})") from None
    bad = [n for n, seconds in durations.items() if not math.isfinite(seconds)]
    if bad:
        raise ValueError(f"{bad[0]!r} has no finite duration")
    return durations


def recorded_here(path: Path) -> bool:
    """Whether the file is the runner's own record (a plain mapping, or none yet), which a run
    updates when it ends; a service's `cpci.durations/1` answer is left as it was fetched."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return True
    except ValueError:
        return False
    return not (isinstance(data, dict) and data.get("schema") == DURATIONS_SCHEMA)


def save(path: Path, durations: dict[str, float]) -> None:
    """Write atomically, so a killed run never leaves a half-written file behind."""
    _write_atomically(path, json.dumps(dict(sorted(durations.items())), indent=0))


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
