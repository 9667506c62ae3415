"""The session's plan: what the parent decides at collection, before any world starts.

`plan_session` takes the collected items and returns a `SessionPlan`: this shard's items (the rest
deselected, by the durations every shard balances by), which of them are configs (`ConfigSpec`,
grouped into `Group`s by world size and backend), which are skipped before planning (their marks
or too few GPUs: they never occupy a world), which cannot be planned (their error), which run in
the parent as plain tests, the GPUs worlds are spread over, and the shard plan's hash. Nothing
runs here and nothing is written: the session writes the shard plan beside the results file and
tells pytest what was deselected.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cpci.runner.parent import sharding
from cpci.runner.parent.durations import Durations
from cpci.runner.parent.markers import MARKER, PlanningError
from cpci.runner.parent.planning import ConfigSpec, Group, make_groups, spec_for
from cpci.runner.parent.skips import SkipConditionError, gpu_skip_reason, mark_skip_reason
from cpci.runner.parent.slots import visible_devices
from cpci.runner.settings import RunnerSettings
from cpci.runner.wire.protocol import Backend
from cpci.schema import ShardPlan

TORCH_MISSING = (
    "torch is not installed: @pytest.mark.cpci tests need it "
    "(pip install 'cpci[runner]', or your own torch build)"
)


@dataclass(frozen=True)
class SessionPlan:
    """This shard's items and what becomes of each."""

    #: The items this shard runs, plain tests first, then configs in group order.
    items: list[pytest.Item] = field(default_factory=list)
    #: The items other shards run.
    deselected: list[pytest.Item] = field(default_factory=list)
    #: Node id -> the config, for those that run in a world.
    specs: dict[str, ConfigSpec] = field(default_factory=dict)
    groups: list[Group] = field(default_factory=list)
    #: Node id -> the config and why it is skipped before planning (it never occupies a world).
    skipped: dict[str, tuple[ConfigSpec, str]] = field(default_factory=dict)
    #: Node id -> why the config cannot be planned: an error of that config alone.
    errors: dict[str, str] = field(default_factory=dict)
    #: The GPUs worlds are spread over, by their visible names (none for CPU worlds).
    devices: list[str] = field(default_factory=list)
    #: What every shard of the run plans from, hashed (None before planning).
    shard_plan: ShardPlan | None = None

    def owns(self, nodeid: str) -> bool:
        """Whether the session reports this item (a config, planned or not), not pytest."""
        return nodeid in self.specs or nodeid in self.errors or nodeid in self.skipped

    def lines(self, settings: RunnerSettings) -> list[str]:
        """What `--cpci-plan` prints: the groups and their configs, the shard, the skips."""
        shard = "" if settings.shard is None else " in shard {}/{}".format(*settings.shard)
        cap = settings.world_cap
        per_world = "no cap on configs per world" if cap is None else f"at most {cap} per world"
        lines = [
            f"cpci plan{shard}: {len(self.specs)} config(s) in {len(self.groups)} group(s) by "
            f"world size and backend (a queue each), up to {settings.workers} world(s) at "
            f"once, {per_world}"
        ]
        for group in self.groups:
            worlds = "" if cap is None else f" (at least {-(-len(group.configs) // cap)} worlds)"
            lines.append(
                f"  group {group.index}: world_size={group.world_size} backend={group.backend} "
                f"configs={len(group.configs)}{worlds}"
            )
            lines.extend(
                f"    {c.nodeid}  timeout {c.timeout:g} s ({c.timeout_from})" for c in group.configs
            )
        if self.shard_plan is not None:
            lines.append(f"  {shard_plan_text(self.shard_plan)}")
        if self.skipped:
            lines.append(f"  {len(self.skipped)} skipped before planning (no world):")
            lines.extend(f"    {n}: {why}" for n, (_, why) in self.skipped.items())
        lines.extend(f"  not runnable: {n}: {why}" for n, why in self.errors.items())
        return lines


def plan_session(
    items: list[pytest.Item],
    settings: RunnerSettings,
    durations: Durations,
    *,
    environ: Mapping[str, str] | None = None,
    gpu_count: Callable[[str], int] | None = None,
    cannot_run: str | None = None,
) -> SessionPlan:
    """Shard `items`, then turn the marked ones into configs and groups; nothing runs here.

    `gpu_count(backend)` says how many GPUs this runner has when `--cpci-gpus` does not (default:
    torch's count, asked only when a cpci marker is there and a GPU driver is); `environ` is where
    `CUDA_VISIBLE_DEVICES` names them; `cannot_run` says why no config can run in this process
    (each is then an error saying so, as each is without torch)."""
    nodeids = [i.nodeid for i in items]
    shard = settings.shard or (0, 1)
    shard_plan = sharding.shard_plan(nodeids, durations.seconds, shard, durations.came_from)
    deselected: list[pytest.Item] = []
    if settings.shard is not None:
        index, total = settings.shard
        shard_of = sharding.assign(nodeids, durations.seconds, total)
        deselected = [i for i in items if shard_of[i.nodeid] != index]
        items = [i for i in items if shard_of[i.nodeid] == index]
    devices: list[str] = []
    if any(item.get_closest_marker(MARKER) for item in items):  # else torch stays unloaded
        count = settings.gpus
        if count is None:
            count = (gpu_count or visible_gpus)(settings.backend)
        devices = visible_devices(os.environ if environ is None else environ, count)
    setting = settings.backend
    backend: Backend = ("nccl" if devices else "gloo") if setting == "auto" else setting
    if importlib.util.find_spec("torch") is None:
        cannot_run = TORCH_MISSING
    specs: dict[str, ConfigSpec] = {}
    skipped: dict[str, tuple[ConfigSpec, str]] = {}
    errors: dict[str, str] = {}
    plain: list[pytest.Item] = []
    configs: list[pytest.Item] = []
    for item in items:
        try:
            spec = spec_for(
                item,
                default_timeout=settings.timeout,
                timeout_from=settings.timeout_from,
                backend=backend,
            )
            skip = None if spec is None else _skip_reason(item, spec, len(devices))
        except (PlanningError, SkipConditionError) as exc:
            errors[item.nodeid] = str(exc)
            configs.append(item)
            continue
        if spec is None:
            plain.append(item)
            continue
        configs.append(item)
        if skip is not None:
            skipped[item.nodeid] = (spec, skip)
        elif cannot_run is not None:
            errors[item.nodeid] = cannot_run
        else:
            specs[item.nodeid] = spec
    groups = make_groups(list(specs.values()))
    order = {c.nodeid: n for n, c in enumerate(c for g in groups for c in g.configs)}
    configs.sort(key=lambda i: order.get(i.nodeid, -1))
    return SessionPlan(
        items=plain + configs,
        deselected=deselected,
        specs=specs,
        groups=groups,
        skipped=skipped,
        errors=errors,
        devices=devices,
        shard_plan=shard_plan,
    )


def _skip_reason(item: pytest.Item, spec: ConfigSpec, gpus: int) -> str | None:
    """Why the config is skipped before planning (it then never occupies a world)."""
    reason = mark_skip_reason(item)
    return reason if reason is not None else gpu_skip_reason(spec.world_size, gpus)


def shard_plan_text(plan: ShardPlan) -> str:
    return (
        f"shard plan {plan.plan_hash[:12]}: {plan.configs} node id(s) shared out over "
        f"{plan.shard_total} shard(s), durations from {plan.durations_from}"
    )


def visible_gpus(backend: str) -> int:
    """GPUs worlds can be spread over; a cheap driver check keeps torch out of CPU-only parents."""
    if backend == "gloo" or not Path("/proc/driver/nvidia").exists():
        return 0
    import torch

    return int(torch.cuda.device_count())
