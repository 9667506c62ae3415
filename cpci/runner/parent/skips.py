"""Configs the parent skips before planning, so a skipped config never occupies a world.

pytest would skip them at setup anyway: `skip` and `skipif` marks (conditions evaluated exactly as
pytest does, strings included) and configs needing more GPUs than this runner has. Starting a
world of ranks only for them to skip costs seconds each; deciding here costs nothing.
"""

from __future__ import annotations

import pytest

# pytest's own evaluation of skip/skipif marks (the function its setup hook calls), so conditions,
# reasons and their errors come out as pytest would give them.
from _pytest.skipping import evaluate_skip_marks


class SkipConditionError(ValueError):
    """A skipif condition pytest could not evaluate: the config errors, as under pytest."""


def mark_skip_reason(item: pytest.Item) -> str | None:
    """Why pytest would skip `item` from its marks, or None when it would run it."""
    try:
        skipped = evaluate_skip_marks(item)
    except pytest.fail.Exception as exc:
        raise SkipConditionError(exc.msg) from None
    return None if skipped is None else skipped.reason


def gpu_skip_reason(world_size: int, gpus: int) -> str | None:
    """Why a world of `world_size` ranks cannot run on a runner with `gpus` GPUs (0: CPU worlds)."""
    if gpus and world_size > gpus:
        return (
            f"needs {world_size} GPUs (one per rank), this runner has {gpus} (CUDA_VISIBLE_DEVICES)"
        )
    return None
