"""The runner's tests. Most start real worlds, which run torch.distributed: without torch each of
those skips saying `[needs torch]`, or fails where the run promises torch (`tests.prerequisites`).
A module whose tests need no torch (the in-process scheduler tests, the pure modules') says
`NEEDS_TORCH = False` and runs anyway.

Shared helpers are in `tests/runner/helpers.py`.
"""

from __future__ import annotations

import pytest

from tests.prerequisites import import_or_skip


@pytest.fixture(autouse=True)
def _torch_for_worlds(request: pytest.FixtureRequest) -> None:
    if getattr(request.module, "NEEDS_TORCH", True):
        import_or_skip("torch", "torch", "the runner's worlds run torch.distributed")
