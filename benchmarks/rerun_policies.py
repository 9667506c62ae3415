"""Rerun policies on the verdict corpus, runner side: adaptive vs fixed-2 vs no reruns.

The corpus's truth (`tests.server.verdict_corpus`: each config's failure rate and signatures,
the broken stretches on main, each PR's injected regressions) is replayed with the runner's own
rerun rule, `cpci.evidence.decide_rerun`, deciding after every attempt: main's runs build each
config's record (the newest `--window` attempts, `analysis.flakiness.flake_record`, as the
evidence summary builds it), and at each PR's head a failing config is rerun while the rule
asks, weighed against the record at the PR's base. A config that failed every attempt is then
judged as the service judges it (`cpci.evidence.flake_test`): the PR's, or a flake's.
Printed per policy and seed (never enforced):

- decidable regressions hidden (goal 0): injected regressions called a flake, among those the
  chance test could call with the cap's attempts (cap + 1 failures reject a flake);
- false alarms (goal <= 1% of flaky failures): flaky failures (a config that is not broken
  failing its first attempt) called the PR's;
- reruns per failing config (goal <= 1.0).

Early flake detection: a flaky config new to the base branch (rate 0.1-0.3) gets
`cpci.evidence.arrival_runs` extra runs; it is caught when its attempts hold a failure and a
pass (FLAKY ON ARRIVAL), printed for K = 1, 2, 3 with the GPU time the extra runs cost.

    .venv/bin/python benchmarks/rerun_policies.py [--seeds 1 2 3 4 5] [--new-configs 2000]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from collections import defaultdict, deque
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the corpus lives with the tests

from cpci.evidence import (  # noqa: E402
    EvidencePolicy,
    RerunRule,
    arrival_runs,
    decide_rerun,
    flake_test,
    record_signature,
)
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
from tests.server.verdict_records import Failure, failure, record  # noqa: E402

POLICIES: dict[str, RerunRule] = {
    "adaptive": RerunRule("adaptive", 2),
    "fixed-2": RerunRule("fixed", 2),
    "none": RerunRule("fixed", 0),
}


@dataclass
class Tally:
    regressions: int = 0
    decidable: int = 0
    hidden: int = 0
    hidden_decidable: int = 0
    flaky_failures: int = 0
    false_alarms: int = 0
    failing: int = 0
    reruns: int = 0


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


def simulate(seed: int, rule: RerunRule, window: int, policy: EvidencePolicy) -> Tally:
    corpus = build_corpus(CorpusSpec(seed=seed, reruns=False))
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
                    record_, rule_cap_attempts(), sigs[:1] * 3, policy
                ).flake_explains
                t.decidable += decidable
                t.hidden += not called_pr
                t.hidden_decidable += decidable and not called_pr
            else:
                t.flaky_failures += 1
                t.false_alarms += called_pr
    return t


def rule_cap_attempts() -> int:
    """Attempts at the runner's default cap (2 reruns): what "decidable" is measured by."""
    return 3


def early_detection(
    k: int, configs: int, seed: int, rule: RerunRule
) -> tuple[dict[float, float], float]:
    """Share of flaky new configs caught per rate, and the extra runs per new config."""
    rng = random.Random(f"{seed}:arrival:{k}")
    caught: dict[float, list[bool]] = defaultdict(list)
    extra = 0
    for _ in range(configs):
        rate = rng.choice((0.1, 0.15, 0.2, 0.25, 0.3))
        runs = arrival_runs(None, False, k)
        extra += runs
        draws = [rng.random() < rate for _ in range(1 + runs)]
        # The first attempt's reruns (no history: rerun up to the cap) count too.
        if draws[0]:
            for _ in range(rule.cap):
                again = rng.random() < rate
                draws.append(again)
                if not again:
                    break
        caught[rate].append(any(draws) and not all(draws))
    return {r: sum(v) / len(v) for r, v in sorted(caught.items())}, extra / configs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--window", type=int, default=100, help="attempts in a config's record")
    parser.add_argument("--new-configs", type=int, default=4000)
    args = parser.parse_args()
    policy = EvidencePolicy()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"rerun policies on the verdict corpus (200 configs, 40 main runs, 40 PRs); load {load}")
    print("policy    seed  hidden(decidable)/regr  false alarms/flaky failures  reruns/failing")
    for name, rule in POLICIES.items():
        total = Tally()
        for seed in args.seeds:
            t = simulate(seed, rule, args.window, policy)
            for field in vars(total):
                setattr(total, field, getattr(total, field) + getattr(t, field))
            print(
                f"{name:9} {seed:4}  {t.hidden:2} ({t.hidden_decidable}/{t.decidable}) of "
                f"{t.regressions:3}        {t.false_alarms:3}/{t.flaky_failures:4} "
                f"({t.false_alarms / max(t.flaky_failures, 1):6.1%})         "
                f"{t.reruns / max(t.failing, 1):.2f}"
            )
        print(
            f"{name:9}  all  decidable hidden {total.hidden_decidable} (goal 0), all hidden "
            f"{total.hidden}/{total.regressions}; false alarms "
            f"{total.false_alarms / max(total.flaky_failures, 1):.1%} (goal <= 1%); reruns per "
            f"failing config {total.reruns / max(total.failing, 1):.2f} (goal <= 1.0)"
        )
    print("early flake detection (flaky new configs, rates 0.1-0.3, adaptive reruns, cap 2):")
    for k in (1, 2, 3):
        shares, extra = early_detection(k, args.new_configs, args.seeds[0], POLICIES["adaptive"])
        text = ", ".join(f"{r:.2f}: {s:.0%}" for r, s in shares.items())
        high = [s for r, s in shares.items() if r >= 0.2]
        print(
            f"  K={k}: caught by rate {text}; rate >= 0.2: {min(high):.0%} at least "
            f"(goal >= 90% at K=2); extra GPU time {extra:.0f} config run(s) per new config"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
