"""Rerun policies on the verdict corpus, runner side: adaptive vs fixed-2 vs no reruns.

The corpus's truth (`tests.server.verdict_corpus`: each config's failure rate and signatures,
the broken stretches on main, each PR's injected regressions) is replayed with the runner's own
rerun rule, `cpci.evidence.decide_rerun`, deciding after every attempt (no second copy of the
rule here): main's runs build each config's record (the newest `--window` attempts,
`analysis.flakiness.flake_record`, as the evidence summary builds it), and at each PR's head a
failing config is rerun while the rule asks, weighed against the record at the PR's base. A
config that failed every attempt is then judged as the service judges it
(`cpci.evidence.flake_test` against the verdict threshold): the PR's, or a flake's. Printed per
policy and seed (never enforced):

- decidable regressions hidden (goal 0): injected regressions called a flake, among those the
  chance test could call with 3 failed attempts (the Action's default cap of 2 reruns);
- false alarms (goal <= 1% of flaky failures): flaky failures (a config that is not broken
  failing its first attempt) called the PR's;
- reruns per failing config (goal <= 1.0), and its floor: a flaky failure is told from a
  regression with the flake's own signature only by a rerun that passes, so a rule that hides
  nothing and raises no false alarm reruns each flaky failure at least once.

Then the frontier: adaptive reruns at each stop level (`RerunRule.stop_chance`) and cap, the
same three figures, over the same seeds.

    .venv/bin/python benchmarks/rerun_policies.py [--seeds 1 2 3 4 5] [--stops 0.2 0.01]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the corpus lives with the tests

from cpci.evidence import (  # noqa: E402
    EvidencePolicy,
    RerunRule,
    decide_rerun,
    flake_test,
    record_signature,
)
from cpci.evidence.reruns import STOP_CHANCE  # noqa: E402
from cpci.schema import ConfigEvidence, FlakeRecord, ResultRecord, RunLink  # noqa: E402
from cpci.server.analysis.flakiness import flake_record  # noqa: E402
from cpci.server.analysis.observations import Observation  # noqa: E402
from tests.server.verdict_corpus import (  # noqa: E402
    ConfigTruth,
    CorpusSpec,
    Regression,
    _broken,
    _regressionfailure,
    build_corpus,
)
from tests.server.verdict_records import (  # noqa: E402
    ATTEMPTS_WITH_RERUNS,
    Failure,
    failure,
    record,
)

POLICIES: dict[str, RerunRule] = {
    "adaptive": RerunRule("adaptive", 2),
    "adaptive-5": RerunRule("adaptive", 5),
    "fixed-2": RerunRule("fixed", 2),
    "none": RerunRule("fixed", 0),
}
STOPS = (0.2, 0.05, 0.02, 0.01, 0.005, 0.002)
CAPS = (2, 5)


@dataclass
class Tally:
    """One policy's counts over one or more seeds."""

    regressions: int = 0
    decidable: int = 0
    hidden: int = 0
    hidden_decidable: int = 0
    flaky_failures: int = 0
    false_alarms: int = 0
    failing: int = 0
    reruns: int = 0

    def add(self, other: Tally) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    @property
    def false_alarm_share(self) -> float:
        return self.false_alarms / max(self.flaky_failures, 1)

    @property
    def reruns_per_failing(self) -> float:
        return self.reruns / max(self.failing, 1)

    @property
    def floor(self) -> float:
        """Reruns per failing config of a rule with no false alarm and nothing hidden: one per
        flaky failure at least."""
        return self.flaky_failures / max(self.failing, 1)


def run_config(
    c: ConfigTruth,
    draw: random.Random,
    cause: Failure | None,
    broken: bool,
    evidence: ConfigEvidence | None,
    rule: RerunRule,
) -> list[ResultRecord]:
    """One config's attempts in one CI run, rerun while `decide_rerun` asks."""
    records: list[ResultRecord] = []
    while True:
        attempt = len(records) + 1
        if cause is not None:
            failed: Failure | None = cause
        elif broken:
            failed = _broken(c)
        elif c.rate and draw.random() < c.rate:
            failed = failure(draw.choice(c.signatures), draw.randrange(c.world_size))
        else:
            failed = None
        if failed is None:
            records.append(record(c, "passed", attempt, flaky=attempt > 1))
        else:
            records.append(record(c, failed.outcome, attempt, failed.errors))
        if not decide_rerun(records, evidence, rule).rerun:
            return records


def observations(k: int, records: list[ResultRecord]) -> list[Observation]:
    link = RunLink(ci_run_id=str(k), ci_attempt=1, commit=str(k), url="")
    return [
        Observation(
            run=link,
            run_id=k,
            environment_id=1,
            outcome=r.outcome,
            flaky=r.flaky,
            signature=record_signature(r) if r.outcome != "passed" else "",
        )
        for r in records
    ]


def simulate(spec: CorpusSpec, rule: RerunRule, window: int, policy: EvidencePolicy) -> Tally:
    """Main's runs, then every PR's head, with `rule` deciding each rerun."""
    corpus = build_corpus(spec)
    seed = spec.seed
    history: dict[str, deque[Observation]] = defaultdict(lambda: deque(maxlen=window))
    evidence_at: list[dict[str, ConfigEvidence]] = []
    for k in range(corpus.spec.main_runs):
        evidence_at.append(
            {
                key: ConfigEvidence(
                    record=flake_record(list(obs)), runs=len({o.run_id for o in obs})
                )
                for key, obs in history.items()
            }
        )
        for c in corpus.configs:
            draw = random.Random(f"{seed}:main:{k}:{c.key}")
            rs = run_config(c, draw, None, c.broken_at(k), evidence_at[k].get(c.key), rule)
            history[c.key].extend(observations(k, rs))
    t = Tally()
    for pull in corpus.pulls:
        evidence = evidence_at[pull.base_run]
        regressions: dict[str, Regression] = {r.config: r for r in pull.regressions}
        for c in corpus.configs:
            if c.broken_at(pull.base_run) or pull.head.get(c.key) in ("not_run", "order_dependent"):
                continue
            draw = random.Random(f"{seed}:pull:{pull.number}:{c.key}")
            regression = regressions.get(c.key)
            cause = _regressionfailure(c, regression.kind, draw) if regression else None
            entry = evidence.get(c.key)
            rs = run_config(c, draw, cause, False, entry, rule)
            if rs[0].outcome == "passed":
                continue
            t.failing += 1
            t.reruns += len(rs) - 1
            failed = [r for r in rs if r.outcome != "passed"]
            every = len(failed) == len(rs)
            record_ = entry.record if entry else FlakeRecord(failures=0, trials=0)
            sigs = [s for s in map(record_signature, failed) if s]
            called_pr = every and not flake_test(record_, len(failed), sigs, policy).flake_explains
            if regression is not None:
                t.regressions += 1
                decidable = not flake_test(
                    record_, ATTEMPTS_WITH_RERUNS, sigs[:1] * ATTEMPTS_WITH_RERUNS, policy
                ).flake_explains
                t.decidable += decidable
                t.hidden += not called_pr
                t.hidden_decidable += decidable and not called_pr
            else:
                t.flaky_failures += 1
                t.false_alarms += called_pr
    return t


def over_seeds(
    spec: CorpusSpec, seeds: Sequence[int], rule: RerunRule, window: int
) -> tuple[Tally, list[Tally]]:
    """The rule's tally on each seed's corpus, and their sum. The verdict threshold and level
    are the service's defaults, as the evidence summary states them."""
    per_seed = [
        simulate(
            CorpusSpec(spec.configs, spec.main_runs, spec.prs, seed=s, reruns=False),
            rule,
            window,
            rule.evidence,
        )
        for s in seeds
    ]
    total = Tally()
    for t in per_seed:
        total.add(t)
    return total, per_seed


def row(label: str, t: Tally) -> str:
    """One line of the table: `label` (policy and seed, or stop level and cap), the figures."""
    return (
        f"{label:16}  {t.hidden:3} ({t.hidden_decidable:3}/{t.decidable:3}) of "
        f"{t.regressions:3}    {t.false_alarms:4}/{t.flaky_failures:5} ({t.false_alarm_share:6.2%})"
        f"     {t.reruns_per_failing:5.2f}  (floor {t.floor:.2f})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--window", type=int, default=100, help="attempts in a config's record")
    parser.add_argument("--configs", type=int, default=200)
    parser.add_argument("--main-runs", type=int, default=40)
    parser.add_argument("--prs", type=int, default=40)
    parser.add_argument("--stops", type=float, nargs="*", default=list(STOPS))
    parser.add_argument("--caps", type=int, nargs="*", default=list(CAPS))
    args = parser.parse_args(argv)
    spec = CorpusSpec(args.configs, args.main_runs, args.prs, reruns=False)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    seeds = " ".join(map(str, args.seeds))
    print(
        f"rerun policies on the verdict corpus ({spec.configs} configs, {spec.main_runs} main "
        f"runs, {spec.prs} PRs; seeds {seeds}; {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load {load})"
    )
    print(f"adaptive: stop level {STOP_CHANCE:.0%}, cap 2 (the Action's reruns); adaptive-5: cap 5")
    print("policy      seed  hidden (decidable)    false alarms/flaky failures  reruns/failing")
    for name, rule in POLICIES.items():
        total, per_seed = over_seeds(spec, args.seeds, rule, args.window)
        for s, t in zip(args.seeds, per_seed, strict=True):
            print(row(f"{name:11} {s:>4}", t))
        print(row(f"{name:11}  all", total))
    if args.stops and args.caps:
        print("frontier: adaptive reruns by stop level and cap, all seeds")
        print("stop    cap       hidden (decidable)    false alarms/flaky failures  reruns/failing")
        for cap in args.caps:
            for stop in args.stops:
                rule = RerunRule("adaptive", cap, stop_chance=stop)
                total, _ = over_seeds(spec, args.seeds, rule, args.window)
                print(row(f"{stop:<7g} {cap:>3}", total))
    print(
        "goals: decidable hidden 0, false alarms <= 1% of flaky failures, reruns per failing "
        "config <= 1.0; floor: flaky failures per failing config (each needs a passing rerun)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
