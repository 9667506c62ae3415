"""When a quarantined config is released: its evidence, never a calendar.

PyTorch re-enables a disabled test after two weeks green, and the same tests are disabled again
and again (pytorch/pytorch#140345). Here a quarantine ends when the base branch's results since
it began bound the config's failure rate below `rate` (`CPCI_QUARANTINE_RELEASE_RATE`) at the
credible level the chance test uses: the Jeffreys upper bound of its failures per attempt. A
config still flaking at 0.2 never gets there; one that was fixed gets there after a number of
straight passes that `passes_to_release` says (38 for 0.05 at the 95% level, from nothing).
"""

from __future__ import annotations

from cpci.evidence.credible import jeffreys_upper
from cpci.schema import FlakeRecord

#: The most passes `passes_to_release` looks ahead: past it, the answer is "more than this".
MOST_PASSES = 1_000_000


def releasable(record: FlakeRecord, rate: float, level: float) -> bool:
    """Whether `record` (the base branch's attempts since the quarantine began) bounds the
    failure rate below `rate` at `level`."""
    return jeffreys_upper(record.failures, record.trials, level) < rate


def passes_to_release(record: FlakeRecord, rate: float, level: float) -> int:
    """How many more straight passes release it (0: it is releasable now); `MOST_PASSES` when
    even that many would not."""
    if not 0 < rate < 1:
        raise ValueError(f"the release rate must be between 0 and 1, got {rate}")

    def enough(passes: int) -> bool:
        return jeffreys_upper(record.failures, record.trials + passes, level) < rate

    if enough(0):
        return 0
    high = 1
    while not enough(high):
        if high >= MOST_PASSES:
            return MOST_PASSES
        high = min(high * 2, MOST_PASSES)
    low = high // 2  # not enough at low (or low is 0), enough at high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high
