"""The runner's end-to-end tests launch real torchrun worlds: without torch there is nothing to run.

Their shared helpers are in `tests/runner/helpers.py`.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the runner's end-to-end tests launch torchrun worlds")
