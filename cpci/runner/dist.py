"""What a distributed test body gets from the `cpci_dist` fixture."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `cpci.runner` stays light: the shim imports it on every rank's launch
    from cpci.runner.protocol import Backend


@dataclass
class DistContext:
    """The rank's view of its world, plus helpers that clean up after the config.

    `torch.distributed` is already initialised when a test body runs; this object just saves the
    boilerplate and gives the config a place to report numbers (e.g. max abs error vs a reference)
    that end up in the results file.
    """

    rank: int
    world_size: int
    local_rank: int
    backend: Backend
    device: Any  # torch.device; typed loosely so the runner imports without torch
    metrics: dict[str, float] = field(default_factory=dict)

    def new_group(self, ranks: list[int] | None = None, **kwargs: Any) -> Any:
        """A sub-group of this world; destroyed after the config however it ends."""
        import torch.distributed as dist

        return dist.new_group(ranks, **kwargs)

    def record_metric(self, name: str, value: float) -> None:
        """Report a number for this config; the results keep the max over ranks."""
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"metric {name!r} must be a finite number, got {value}")
        self.metrics[name] = max(value, self.metrics.get(name, value))
