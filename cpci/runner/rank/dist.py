"""What a distributed test body gets from the `cpci_dist` fixture."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `cpci.runner` stays light: the shim imports it on every rank's launch
    from cpci.runner.wire.protocol import Backend


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
        """Report a number for this config; the results keep the max over ranks.

        A name the results cannot hold (empty, or longer than the schema's limit) or a value that
        is not a finite number raises ValueError here, in the test, so that config fails with the
        reason and no other config's record is touched.
        """
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"metric {name!r} must be a number, got {value!r}") from None
        problem = metric_problem(name, number)
        if problem is not None:
            raise ValueError(problem)
        self.metrics[name] = max(number, self.metrics.get(name, number))


def metric_problem(name: object, value: object) -> str | None:
    """Why the results file cannot keep metric `name` = `value`, or None when it can.

    NaN and infinities are refused, as the results schema refuses them: a diverged result is a
    failure to assert on, not a number to compare across commits.
    """
    # Deferred: cpci.schema loads pydantic, which the shim never needs.
    from cpci.schema import MAX_METRIC_NAME_LENGTH

    if not isinstance(name, str):
        return f"metric name must be a string, got {type(name).__name__} {name!r}"
    if not name:
        return "metric name is empty: give the metric a name"
    if len(name) > MAX_METRIC_NAME_LENGTH:
        return (
            f"metric name is {len(name)} characters, the limit is {MAX_METRIC_NAME_LENGTH}: "
            f"{name[:40]!r}... (shorten it)"
        )
    if "\x00" in name:
        return f"metric name holds a NUL character: {name!r} (the service cannot store it)"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"metric {name!r} must be a number, got {type(value).__name__} {value!r}"
    if not math.isfinite(value):
        return f"metric {name!r} must be a finite number, got {value}"
    return None
