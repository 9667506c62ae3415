"""Early flake detection: flaky configs new to the base branch, caught before they land.

One CI run of a new config goes through the runner's own code: `cpci.runner.parent.attempts.
settle` with the Action's rerun policy (adaptive, `DEFAULT_CAPS`) and `--cpci-new-config-runs K`,
the evidence summary lacking the config (new to the base branch), fresh worlds replaced by a
draw at the config's rate. What its records then show is judged by the service's own rule
(`cpci.server.analysis.verdicts.decide`, no second copy here):

- first attempt passed: K more runs, alone, the first failure ending them;
- first attempt failed: rerun while the rule asks (no history: up to the cap), stopping at the
  first pass; a new config's reruns are arrival runs too;
- a pass and a failure: FLAKY ON ARRIVAL, which gates ("gates"); a pass and a failure judged
  plain FLAKY ("shown" counts both: the author sees the flake either way).

A PR is pushed and run several times before it merges and the config stays new in each run, so
per PR it is caught when any of its `R` runs catches it. The verdict corpus has one head run per
PR and so no distribution of runs per PR to draw from: `R` is printed for a few values instead
(10,193 merged GitHub PRs: commits per PR median 1, mean 3.26, 75th percentile 3; Packmind,
"Observations on +10,000 Pull Requests on GitHub"). Injected rates 0.1-0.3, printed for K = 0
(reruns only), 1, 2, 3 with the extra GPU time: runs beyond the first attempt per new flaky
config, and K per new config that never fails. The runner also bounds arrival runs to a share of
the shard's time (`--cpci-new-config-share`, 25%), which this leaves out: one new config among
many is inside it.

    .venv/bin/python benchmarks/early_detection.py [--seeds 1 2 3] [--configs 2000] [--pr-runs 2 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the records are the corpus's, which lives with the tests

from cpci.evidence import DEFAULT_CAPS, culprit_error  # noqa: E402
from cpci.runner.parent.attempt_records import AttemptRecord  # noqa: E402
from cpci.runner.parent.attempts import Attempt, settle  # noqa: E402
from cpci.runner.parent.evidence import RunEvidence  # noqa: E402
from cpci.runner.parent.planning import ConfigSpec  # noqa: E402
from cpci.runner.parent.rerun_policy import RerunPolicy  # noqa: E402
from cpci.schema import ResultRecord  # noqa: E402
from cpci.server.analysis.verdicts import ResultView, decide  # noqa: E402
from tests.builders import evidence_summary  # noqa: E402
from tests.server.verdict_records import FLAKY_SIGNATURES, failure, record  # noqa: E402

RATES = (0.1, 0.15, 0.2, 0.25, 0.3)
KS = (0, 1, 2, 3)
#: The goal: caught at least this often for rates >= 0.2 with K = 2.
GOAL = 0.9
#: The base branch's evidence: it knows other configs, not the new ones.
SUMMARY = evidence_summary({})


@dataclass(frozen=True)
class NewConfig:
    """A flaky config the PR adds: its name and true failure rate."""

    nodeid: str
    world_size: int
    rate: float

    @property
    def spec(self) -> ConfigSpec:
        path = self.nodeid.split("::", 1)[0]
        return ConfigSpec(self.nodeid, path, self.world_size, "gloo", timeout=60)


def attempt(c: NewConfig, n: int, draw: random.Random) -> ResultRecord:
    if draw.random() < c.rate:
        failed = failure(FLAKY_SIGNATURES[0].format(n=n, d=0.01, r=0), 0)
        return record(c, failed.outcome, n, failed.errors)
    return record(c, "passed", n)


def view(r: ResultRecord) -> ResultView:
    """A record as the service reads it back for a verdict."""
    messages = tuple(e.message for e in r.rank_errors)
    return ResultView(
        r.outcome,
        flaky=r.flaky,
        messages=messages,
        culprit=culprit_error([e.model_dump() for e in r.rank_errors]),
        attempt=r.attempt,
        arrival=r.arrival,
        stop_reason=r.stop_reason,
    )


#: What one CI run shows of a new flake: FLAKY ON ARRIVAL (which gates), or any flaky verdict.
KINDS = ("gates", "shown")


def ci_run(c: NewConfig, k: int, policy: RerunPolicy, draw: random.Random) -> tuple[set[str], int]:
    """One CI run of the new config, as the runner makes it and the service judges it: which of
    `KINDS` it caught, and the runs made beyond its first attempt."""
    sent: list[ResultRecord] = []

    def run(specs: list[ConfigSpec], number: int) -> AttemptRecord:
        return AttemptRecord(c.spec, attempt(c, number, draw), [], final=False)

    first = run([c.spec], 1)  # sent before settling, as the scheduler sends it
    final = settle(Attempt(first, [], shared=False), policy, run, lambda a: sent.append(a.result))
    last = final.record.result
    records = [last] if last.attempt == 1 else [first.result, *sent, last]
    verdict = decide([view(r) for r in records], None, None).verdict
    caught = {"gates", "shown"} if verdict == "flaky_on_arrival" else set()
    if verdict == "flaky":
        caught = {"shown"}
    return caught, len(records) - 1


@dataclass
class Figures:
    """For one K and rate: new configs caught per CI run and per PR of R runs (by kind), and
    the runs made beyond each CI run's first attempt."""

    configs: int = 0
    per_run: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    per_pr: dict[tuple[str, int], int] = field(default_factory=dict)
    extra: int = 0
    runs: int = 0

    def share(self, kind: str, runs: int = 1) -> float:
        caught = self.per_run[kind] if runs == 1 else self.per_pr[kind, runs]
        return caught / max(self.configs, 1)


def measure(
    k: int, rate: float, configs: int, seeds: Sequence[int], pr_runs: Sequence[int]
) -> Figures:
    """`configs` new configs at `rate` per seed, each in a PR of max(pr_runs) CI runs."""
    evidence = RunEvidence(SUMMARY, "benchmark")
    policy = RerunPolicy(reruns=DEFAULT_CAPS["adaptive"], mode="adaptive", evidence=evidence)
    f = Figures(per_pr={(kind, r): 0 for kind in KINDS for r in pr_runs})
    most = max([1, *pr_runs])
    for seed in seeds:
        for i in range(configs):
            c = NewConfig(f"tests/test_new.py::test_new[{i}]", 2, rate)
            draw = random.Random(f"{seed}:{k}:{rate}:{i}")
            caught: list[set[str]] = []
            for _ in range(most):
                kinds, extra = ci_run(c, k, replace(policy, new_config_runs=k), draw)
                caught.append(kinds)
                f.extra += extra
                f.runs += 1
            f.configs += 1
            for kind in KINDS:
                f.per_run[kind] += kind in caught[0]
                for r in pr_runs:
                    f.per_pr[kind, r] += any(kind in run for run in caught[:r])
    return f


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--configs", type=int, default=2000, help="new configs per rate and seed")
    parser.add_argument("--pr-runs", type=int, nargs="*", default=[2, 3, 4])
    args = parser.parse_args(argv)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"early flake detection: {args.configs} flaky new configs per rate and seed, seeds "
        f"{' '.join(map(str, args.seeds))}; reruns adaptive, cap {DEFAULT_CAPS['adaptive']}; "
        f"{platform.machine()}, {os.cpu_count()} CPUs, load {load}"
    )
    print("gates: judged FLAKY ON ARRIVAL; shown: that or FLAKY (a pass and a failure at head)")
    print(
        "K kind   caught per CI run, by rate               | rate >= 0.2 (worst), per PR of R "
        "runs | extra runs per flaky / clean new config"
    )
    for k in KS:
        figures = {rate: measure(k, rate, args.configs, args.seeds, args.pr_runs) for rate in RATES}
        extra = sum(f.extra for f in figures.values()) / sum(f.runs for f in figures.values())
        for kind in KINDS:
            per_run = "  ".join(f"{r:.2f}: {f.share(kind):4.0%}" for r, f in figures.items())
            per_pr = "  ".join(
                f"R={runs}: {min(f.share(kind, runs) for r, f in figures.items() if r >= 0.2):4.0%}"
                for runs in [1, *args.pr_runs]
            )
            print(f"{k} {kind:5}  {per_run} | {per_pr} | {extra:.2f} / {k}")
    print(
        f"goal: >= {GOAL:.0%} of rate >= 0.2 caught at K = 2; per CI run a rate-0.2 flake passes "
        "all K + 1 runs with chance 0.8^(K + 1), so one run of a PR cannot reach it"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
