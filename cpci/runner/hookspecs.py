"""The hooks cpci adds to pytest, for suites whose libraries keep state of their own."""

from __future__ import annotations

import pytest


@pytest.hookspec
def pytest_cpci_reset(config_nodeid: str) -> None:
    """Called on every rank after each config ran (however it ended), before the next one.

    cpci already puts back what torch owns (seeds, env vars, default dtype and device, grad mode,
    deterministic algorithms, threads, TF32, matmul precision, cuDNN and SDPA flags, sub-groups);
    implement this in a conftest.py to reset what only your libraries know about, e.g.
    Megatron's `parallel_state.destroy_model_parallel()`, TransformerEngine's caches or
    `torch._dynamo.reset()`. An exception here fails the config just run with its traceback.
    """
