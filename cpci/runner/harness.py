"""Which of torch's multi-process test harnesses a test class belongs to: read by both sides.

The parent plans a harness test as a config (`cpci.runner.parent.testcases`) and each rank runs
it as the harness's own child would (`cpci.runner.rank.testcase_adapter`); both tell a harness
class by this one function, so they never disagree about which tests are harness tests.
"""

from __future__ import annotations

import sys
from typing import Any, Literal

HARNESS_MODULE = "torch.testing._internal.common_distributed"

#: `MultiProcessTestCase` and its family (a spawn per test), or `MultiProcContinuousTest` (one
#: spawn per class, tests fed over a queue).
Family = Literal["multiprocess", "continuous"]


def harness_family(cls: Any) -> Family | None:
    """Which harness `cls` derives from (None: not a harness class, or torch's not loaded).

    Looked up in `sys.modules` so that a session without harness tests never imports it.
    """
    module = sys.modules.get(HARNESS_MODULE)
    if module is None or not isinstance(cls, type):
        return None
    if issubclass(cls, module.MultiProcessTestCase):
        return "multiprocess"
    if issubclass(cls, module.MultiProcContinuousTest):
        return "continuous"
    return None
