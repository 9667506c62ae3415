"""Score what the service said about a verdict corpus against the corpus's truth.

Each figure counts wrong verdicts of one kind (a regression hidden, a poisoning that worked, a
false NEW FAILURE, ...) next to the goal it is held to; each wrong verdict is kept as a `Miss`
naming the PR, the config, the truth and the verdict, so a failed goal shows its cases.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from tests.server.verdict_corpus import Corpus
from tests.server.verdict_play import Observed

#: Verdicts that hide a regression: it is there, and the reader is told not to worry (the
#: corpus's regressions are in configs that work at the base, so "broken at base" hides too).
HIDING = frozenset({"flaky", "infra", "passed", "fixed", "skipped", "broken_at_base"})
#: Recall is measured on flaky configs at least this flaky (the issue's figure).
RECALL_RATE = 0.1
RECALL_GOAL = 0.95
FALSE_ALARM_GOAL = 0.01
#: Head truths left out of the false alarms: a real problem (a regression, an order dependency),
#: no result (a missing shard), or a never-ran config (scored on its own, so that each goal
#: moves with one fix).
NOT_FALSE_ALARMS = frozenset({"regression", "order_dependent", "missing", "not_run"})


@dataclass(frozen=True)
class Tally:
    hits: int
    total: int

    @property
    def share(self) -> float:
        return self.hits / self.total if self.total else 0.0

    def __str__(self) -> str:
        return f"{self.hits}/{self.total} ({100 * self.share:.1f}%)"


@dataclass(frozen=True)
class Figure:
    name: str
    value: Tally
    goal: str
    met: bool | None  # None: a figure without a goal


@dataclass(frozen=True)
class Miss:
    """One verdict that missed its goal: which figure it counts in, where, truth and verdict."""

    figure: str
    pull: int | None  # None for the flaky list
    config: str
    truth: str
    verdict: str

    def __str__(self) -> str:
        where = f"PR #{self.pull}" if self.pull is not None else "flaky list"
        return f"{where}: {self.config}: {self.truth} -> {self.verdict}"


@dataclass(frozen=True)
class Score:
    hidden_by_attempts: Mapping[int, Tally]  # attempts failed -> regressions hidden
    hidden_as: Mapping[str, int]  # hiding verdict -> regressions it hid
    caught: Tally  # regressions called NEW FAILURE
    caught_in_flaky_by_attempts: Mapping[int, Tally]  # of those in configs that really flake
    poisoning_hid: Tally
    recall_all: Tally
    recall_failed: Tally
    false_flaky_labels: Tally  # configs labelled flaky that never flake (rate 0)
    false_alarms_failing: Tally
    false_alarms_all: Tally
    never_ran_new_failure: Tally
    order_dependent_flaky: Tally
    partial_with_verdict: Tally
    misses: tuple[Miss, ...] = ()

    def figures(self) -> list[Figure]:
        """Each figure with the goal it is held to (the test asserts these, the benchmark
        prints them)."""
        out = [
            Figure(
                f"regressions hidden (flaky/infra/passed/broken at base), {n} attempt(s) failed",
                tally,
                "0" if n >= 3 else "(reruns off: no goal)",
                tally.hits == 0 if n >= 3 else None,
            )
            for n, tally in sorted(self.hidden_by_attempts.items())
        ]
        out.append(Figure("regressions called NEW FAILURE", self.caught, "(no goal)", None))
        out += [
            Figure(
                f"regressions in flaky configs called NEW FAILURE, {n} attempt(s) failed",
                tally,
                "all" if n >= 3 else "(reruns off: no goal)",
                tally.hits == tally.total if n >= 3 else None,
            )
            for n, tally in sorted(self.caught_in_flaky_by_attempts.items())
        ]
        out += [
            Figure(
                "other-PR poisoning that hid a regression",
                self.poisoning_hid,
                "0",
                self.poisoning_hid.hits == 0,
            ),
            Figure(
                f"flaky recall (rate >= {RECALL_RATE}) within the window, all",
                self.recall_all,
                "(no goal)",
                None,
            ),
            Figure(
                f"flaky recall (rate >= {RECALL_RATE}), of those that failed in the window",
                self.recall_failed,
                f">= {RECALL_GOAL:.0%}",
                self.recall_failed.share >= RECALL_GOAL,
            ),
            Figure(
                "flaky labels on configs that never flake",
                self.false_flaky_labels,
                "(no goal)",
                None,
            ),
            Figure(
                "false NEW FAILURE, of failing non-regressed configs (a flaky config failing "
                "every attempt by chance looks like a regression: floor ~ mean p^2)",
                self.false_alarms_failing,
                "(no goal)",
                None,
            ),
            Figure(
                "false NEW FAILURE, of all verdicts",
                self.false_alarms_all,
                f"<= {FALSE_ALARM_GOAL:.0%}",
                self.false_alarms_all.share <= FALSE_ALARM_GOAL,
            ),
            Figure(
                "never-ran configs called NEW FAILURE",
                self.never_ran_new_failure,
                "0",
                self.never_ran_new_failure.hits == 0,
            ),
            Figure(
                "order-dependent configs called flaky",
                self.order_dependent_flaky,
                "0",
                self.order_dependent_flaky.hits == 0,
            ),
            Figure(
                "partial-shard PRs with a final verdict",
                self.partial_with_verdict,
                "0",
                self.partial_with_verdict.hits == 0,
            ),
        ]
        return out


def score(corpus: Corpus, observed: Observed) -> Score:
    """Compare every verdict read with the truth; each wrong one is also kept as a `Miss`."""
    t = _Counts()
    rates = {c.key: c.rate for c in corpus.configs}
    for pull in corpus.pulls:
        view = observed.reports[pull.number]
        if pull.partial:
            final = [k for k, v in view.verdicts.items() if v != "pending"]
            t.add(
                "partial",
                view.status != "pending" or bool(final),
                pull.number,
                "*",
                "partial",
                view.status,
            )
            continue
        for r in pull.regressions:
            verdict = view.verdict(r.config)
            if t.add(
                f"hidden/{r.attempts_failed}",
                verdict in HIDING,
                pull.number,
                r.config,
                f"regression ({r.kind})",
                verdict,
            ):
                t.hidden_as[verdict] += 1
            t.add("caught", verdict == "new_failure")
            if rates[r.config] > 0:
                t.add(f"caught_in_flaky/{r.attempts_failed}", verdict == "new_failure")
        for x in pull.poisons:
            verdict = view.verdict(x.config)
            t.add(
                "poisoned",
                verdict in HIDING,
                pull.number,
                x.config,
                f"regression poisoned by PR {x.by} ({x.kind})",
                verdict,
            )
        for key, truth in pull.head.items():
            verdict = view.verdict(key)
            if truth == "not_run":
                t.add("never_ran", verdict == "new_failure", pull.number, key, truth, verdict)
            elif truth == "order_dependent":
                t.add("order_dependent", verdict == "flaky", pull.number, key, truth, verdict)
            elif truth not in NOT_FALSE_ALARMS:
                alarm = verdict == "new_failure"
                t.add("alarms_all", alarm, pull.number, key, truth, verdict)
                if truth != "passed":
                    t.add("alarms_failing", alarm)
    flagged = observed.flaky_at_window
    for c in corpus.configs:
        if c.rate >= RECALL_RATE:
            t.add("recall_all", c.key in flagged)
            if c.key in corpus.failed_in_window:
                found = c.key in flagged
                t.add("recall_failed", found)
                if not found:
                    t.miss("recall_failed", None, c.key, f"flaky (rate {c.rate})", "not listed")
        if c.rate == 0:
            t.add("false_flaky", c.key in flagged, None, c.key, "never flakes", "listed flaky")
    return Score(
        hidden_by_attempts=t.by_attempts("hidden/"),
        hidden_as=dict(t.hidden_as),
        caught=t.tally("caught"),
        caught_in_flaky_by_attempts=t.by_attempts("caught_in_flaky/"),
        poisoning_hid=t.tally("poisoned"),
        recall_all=t.tally("recall_all"),
        recall_failed=t.tally("recall_failed"),
        false_flaky_labels=t.tally("false_flaky"),
        false_alarms_failing=t.tally("alarms_failing"),
        false_alarms_all=t.tally("alarms_all"),
        never_ran_new_failure=t.tally("never_ran"),
        order_dependent_flaky=t.tally("order_dependent"),
        partial_with_verdict=t.tally("partial"),
        misses=tuple(t.misses),
    )


class _Counts:
    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.totals: Counter[str] = Counter()
        self.hidden_as: Counter[str] = Counter()
        self.misses: list[Miss] = []

    def add(
        self,
        name: str,
        hit: bool,
        pull: int | None = None,
        config: str = "",
        truth: str = "",
        verdict: str = "",
    ) -> bool:
        """Count one case of figure `name`, whose hits are wrong verdicts: a hit with a config
        is kept as a miss to show."""
        self.totals[name] += 1
        self.hits[name] += hit
        if hit and config:
            self.miss(name, pull, config, truth, verdict)
        return hit

    def miss(self, name: str, pull: int | None, config: str, truth: str, verdict: str) -> None:
        self.misses.append(Miss(name, pull, config, truth, verdict))

    def tally(self, name: str) -> Tally:
        return Tally(self.hits[name], self.totals[name])

    def by_attempts(self, prefix: str) -> dict[int, Tally]:
        """The figures named `prefix` + a number of failed attempts, by that number."""
        names = [n for n in self.totals if n.startswith(prefix)]
        return {int(n[len(prefix) :]): self.tally(n) for n in names}
