"""Which failures are the machine's fault rather than the code's: the signature rules, in one place.

Only crashes, timeouts and errors qualify: an out-of-memory *assertion failure* in a test body
can be the PR's own doing (it made the config use more memory) and stays a real failure. The
rules are matched against the error of the rank that failed *first* (the culprit), never against
the other ranks' log tails: when one rank segfaults, its peers log "NCCL error ... remote process
exited", which is the consequence, not the cause. The verdicts also weigh the base: an
infra-looking failure on every attempt at head while the base passes is the PR's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

INFRA_OUTCOMES = frozenset({"crashed", "timeout", "error"})


@dataclass(frozen=True)
class InfraRule:
    name: str
    description: str
    pattern: re.Pattern[str]


RULES: tuple[InfraRule, ...] = (
    InfraRule(
        "nccl-watchdog",
        "NCCL watchdog timeout: a collective never completed",
        re.compile(
            r"watchdog caught collective operation timeout|ProcessGroupNCCL.*(watchdog|timed? ?out)"
            r"|NCCL (communicator|operation).*timed? ?out",
            re.IGNORECASE,
        ),
    ),
    InfraRule(
        "nccl-system",
        "NCCL system or network error",
        re.compile(r"NCCL error.*(unhandled system error|remote process exited|network)", re.I),
    ),
    InfraRule(
        "cuda-oom",
        "CUDA out of memory",
        re.compile(r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError", re.I),
    ),
    InfraRule(
        "gpu-lost",
        "the GPU fell off the bus or reported an uncorrectable ECC error",
        re.compile(r"fallen off the bus|GPU is lost|uncorrectable ECC error", re.I),
    ),
    InfraRule(
        "lost-runner",
        "the CI runner was lost or shut down",
        re.compile(
            r"runner has received a shutdown signal|lost communication with the server"
            r"|runner .*(lost|went offline)",
            re.I,
        ),
    ),
)


def infra_signature(outcome: str, messages: Iterable[str]) -> InfraRule | None:
    """The first rule whose pattern matches one of the failure messages, if the outcome allows."""
    if outcome not in INFRA_OUTCOMES:
        return None
    texts = list(messages)
    for rule in RULES:
        if any(rule.pattern.search(text) for text in texts):
            return rule
    return None
