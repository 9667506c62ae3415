"""Infra storms: a shard where most configs failed the same way has one cause, not thousands.

When an NCCL install is broken or a runner dies, every config of its shard fails with one
signature. Listing each as the PR's new failure buries the report (Trunk drops such uploads;
cpci keeps them and says "storm"). Per shard and matrix leg, the configs failing at head are
grouped by the signature of their culprit's error (the one `signature` function, on the error of
the rank that failed first, as the verdicts read it); when one signature covers at least
`share` of the shard's configs, and at least `min_configs` of them, the shard is a storm.

What a storm means for its configs' verdicts (docs/verdicts.md, "Storms"): when the signature
matches an infra rule, they are INFRA even if each failed every attempt while the base passed,
because a fault on a whole shard is the machine's. A storm without an infra rule is flagged but
leaves their verdicts alone: a PR that breaks every config must still fail its gate.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from cpci.evidence import signature
from cpci.schema import FAILING_OUTCOMES, NOT_RUN_OUTCOMES, Storm
from cpci.server.analysis.infra import infra_signature
from cpci.server.analysis.verdicts import ResultView, culprit_of, state_of

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class StormPolicy:
    """`share`: the fraction of a shard's configs one signature must cover (0 < share <= 1);
    `min_configs`: the fewest configs a storm has (a 3-config shard failing is no storm)."""

    share: float = 0.8
    min_configs: int = 20

    def __post_init__(self) -> None:
        if not 0 < self.share <= 1:
            raise ValueError(f"storm share must be in (0, 1], got {self.share}")
        if self.min_configs < 1:
            raise ValueError(f"storm min_configs must be >= 1, got {self.min_configs}")


@dataclass(frozen=True)
class Storms:
    """The storms found, and for each config caught in one, its storm."""

    found: list[Storm]
    of: Mapping[object, Storm]

    def __bool__(self) -> bool:
        return bool(self.found)


NO_STORMS = Storms([], {})


Signed = tuple[str, str | None]


def failure_signature(
    results: Sequence[ResultView], seen: dict[tuple[str, str], Signed] | None = None
) -> Signed | None:
    """A failing (or never-run) config's signature and the infra rule it matches, if any;
    None for a config that passed, was skipped, or passed on a rerun. `seen` remembers the
    signatures of (outcome, error) pairs already read: a storm repeats a few thousands of times."""
    state = state_of(results)
    never_ran = state == "skip" and any(r.outcome in NOT_RUN_OUTCOMES for r in results)
    if state != "fail" and not never_ran:
        return None
    for r in results:
        if r.outcome in FAILING_OUTCOMES or r.outcome in NOT_RUN_OUTCOMES:
            text = culprit_of(r)
            key = (r.outcome, text)
            found = seen.get(key) if seen is not None else None
            if found is None:
                found = _sign(r.outcome, text)
                if seen is not None:
                    seen[key] = found
            return found
    return None


def _sign(outcome: str, text: str) -> Signed:
    if outcome in NOT_RUN_OUTCOMES:
        return signature(text), "not-run"
    rule = infra_signature(outcome, (text,))
    return signature(text), rule.name if rule else None


def find_storms(
    head: Mapping[K, Sequence[ResultView]],
    where: Mapping[K, tuple[int, str]],
    policy: StormPolicy,
) -> Storms:
    """The storms among `head` (results per config), `where` placing each config on its
    (shard index, leg). Configs with no place are left out. Cheap per config: loaders share one
    view among identical results, so a storm's configs hold equal lists of the same few views;
    configs are grouped by place and those views (by identity: `head` keeps them alive) in one
    pass, and each group is signed once, its size counted."""
    alike: dict[tuple[tuple[int, str], tuple[int, ...]], list[K]] = defaultdict(list)
    for key, results in head.items():
        place = where.get(key)
        if place is not None:
            alike[place, tuple(map(id, results))].append(key)
    groups: dict[tuple[int, str], list[list[K]]] = defaultdict(list)
    for (place, _), same in alike.items():  # in the order of each group's first config
        groups[place].append(same)
    found: list[Storm] = []
    of: dict[object, Storm] = {}
    seen: dict[tuple[str, str], Signed] = {}
    for (shard, leg), sames in sorted(groups.items()):
        configs = sum(map(len, sames))
        if configs < policy.min_configs:
            continue
        signed = [(failure_signature(head[same[0]], seen), same) for same in sames]
        counts: Counter[Signed] = Counter()
        for sign, same in signed:
            if sign is not None:
                counts[sign] += len(same)
        if not counts:
            continue
        (sig, rule), n = counts.most_common(1)[0]
        if n < policy.min_configs or n < policy.share * configs:
            continue
        storm = Storm(shard=shard, leg=leg, signature=sig, configs=n, of=configs, infra_rule=rule)
        found.append(storm)
        for sign, same in signed:
            if sign == (sig, rule):
                of.update(dict.fromkeys(same, storm))
    return Storms(found, of) if found else NO_STORMS
