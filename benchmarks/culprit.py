"""The culprit on main, on injected breaks with commits CI never ran: is the named commit or
range right, and how many dispatched runs does the bisection take?

Each case is a first-parent chain of `--commits` commits; the config passes before an injected
break and fails (the runner's three attempts) from it on. CI runs each commit with probability
`p_run` (the first ten and the tip always), and a passing commit's first attempt fails with
probability `--noise` (a flake its rerun passes). The service's analysis
(`cpci.server.analysis.culprit.find_culprit`, the code `GET .../culprit` runs) names the range;
then the bisection runs the config at `CulpritRange.midpoint()` (what `cpci culprit --dispatch`
asks GitHub for), each run appended to the history, until one suspect is left. Printed per
`p_run`: the cases whose range was exactly right (last good: the newest run commit before the
break, first bad: the oldest run at or after it), those undecided (a flake not ruled out), any
wrong, and the dispatches against the bound ceil(log2 suspects). A config that only flakes
(failing all three attempts now and then, no break) must never be blamed: counted apart.

    python benchmarks/culprit.py [--seeds 5] [--cases 200] [--commits 60] [--noise 0.05]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from dataclasses import dataclass, field

from cpci.evidence import EvidencePolicy
from cpci.schema import RunLink
from cpci.schema.culprit import CulpritRange
from cpci.server.analysis.culprit import find_culprit
from cpci.server.analysis.observations import Observation

CONFIG = "tests/test_cp.py::test_ring@4"
HISTORY = 10  # commits always run before any break


def sha(k: int) -> str:
    return f"{k:040x}"


@dataclass
class Case:
    """One chain and what CI ran on it, oldest commit 0."""

    commits: int
    fails_from: int | None  # the injected break; None: a config that only flakes
    flake: float
    rng: random.Random
    history: list[Observation] = field(default_factory=list)

    def run(self, k: int) -> None:
        """CI runs the config at commit `k`: three failing attempts past the break, else a
        pass (after a failed first attempt with probability `flake`)."""
        broken = self.fails_from is not None and k >= self.fails_from
        if self.fails_from is None and self.rng.random() < self.flake:
            broken = True  # a flake that failed every attempt this time
        if broken:
            outcomes = [("failed", False)] * 3
        elif self.rng.random() < self.flake:
            outcomes = [("failed", False), ("passed", True)]
        else:
            outcomes = [("passed", False)]
        for outcome, flaky in outcomes:
            run_id = len(self.history) + 1
            link = RunLink(ci_run_id=str(run_id), ci_attempt=1, commit=sha(k), url="")
            self.history.append(
                Observation(
                    run=link,
                    run_id=run_id,
                    environment_id=1,
                    outcome=outcome,
                    flaky=flaky,
                    signature="out differs" if outcome == "failed" else "",
                )
            )

    def culprit(self, policy: EvidencePolicy) -> CulpritRange:
        chain = [sha(k) for k in range(self.commits - 1, -1, -1)]
        return find_culprit(
            repository="acme/attn",
            branch="main",
            config=CONFIG,
            chain=chain,
            history=self.history,
            policy=policy,
        )


@dataclass
class Tally:
    cases: int = 0
    exact: int = 0
    undecided: int = 0
    wrong: int = 0
    found: int = 0  # bisections that ended at the injected commit
    dispatches: list[int] = field(default_factory=list)
    over_bound: int = 0
    blamed: int = 0  # flake-only configs named broken


def break_case(rng: random.Random, commits: int, p_run: float, noise: float) -> Case:
    fails_from = rng.randrange(HISTORY + 1, commits)
    case = Case(commits, fails_from, noise, rng)
    for k in range(commits):
        if k < HISTORY or k == commits - 1 or rng.random() < p_run:
            case.run(k)
    return case


def bisect(case: Case, found: CulpritRange, policy: EvidencePolicy, tally: Tally) -> None:
    bound = math.ceil(math.log2(len(found.suspects))) if len(found.suspects) > 1 else 0
    steps = 0
    while (mid := found.midpoint()) is not None:
        case.run(int(mid, 16))
        steps += 1
        found = case.culprit(policy)
    tally.dispatches.append(steps)
    tally.over_bound += steps > bound
    assert case.fails_from is not None
    tally.found += found.culprit == sha(case.fails_from)


def measure(
    seeds: int, cases: int, commits: int, p_run: float, noise: float, policy: EvidencePolicy
) -> Tally:
    tally = Tally()
    for seed in range(seeds):
        rng = random.Random(f"{seed}-{p_run}")
        for _ in range(cases):
            case = break_case(rng, commits, p_run, noise)
            assert case.fails_from is not None
            ran = sorted({int(o.run.commit, 16) for o in case.history})
            found = case.culprit(policy)
            tally.cases += 1
            if found.status == "undecided":
                tally.undecided += 1
                continue
            good = max(k for k in ran if k < case.fails_from)
            bad = min(k for k in ran if k >= case.fails_from)
            right = (found.status, found.last_good, found.first_bad) == (
                "broken",
                sha(good),
                sha(bad),
            ) and found.untested == [sha(k) for k in range(good + 1, bad)]
            if not right:
                tally.wrong += 1
                continue
            tally.exact += 1
            bisect(case, found, policy, tally)
            flaky = Case(commits, None, 0.3, rng)
            for k in range(commits):
                if rng.random() < p_run or k == commits - 1:
                    flaky.run(k)
            tally.blamed += flaky.culprit(policy).status == "broken"
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--cases", type=int, default=200, help="breaks per seed and p_run")
    parser.add_argument("--commits", type=int, default=60)
    parser.add_argument("--noise", type=float, default=0.05, help="flake rate of a good commit")
    parser.add_argument("--p-run", type=float, nargs="+", default=[0.3, 0.6, 0.9])
    args = parser.parse_args()
    policy = EvidencePolicy()
    print(
        f"{args.seeds} seeds x {args.cases} injected breaks on a {args.commits}-commit chain, "
        f"good commits flaking at {args.noise:g}; flake-only configs (rate 0.3) beside each"
    )
    print(
        f"{'p_run':>5} {'cases':>6} {'exact':>6} {'undec':>6} {'wrong':>6} {'found':>6} "
        f"{'disp mean':>9} {'max':>4} {'>bound':>6} {'flaky blamed':>12}"
    )
    for p_run in args.p_run:
        t = measure(args.seeds, args.cases, args.commits, p_run, args.noise, policy)
        mean = statistics.fmean(t.dispatches) if t.dispatches else 0.0
        print(
            f"{p_run:>5.1f} {t.cases:>6} {t.exact:>6} {t.undecided:>6} {t.wrong:>6} "
            f"{t.found:>6} {mean:>9.2f} {max(t.dispatches, default=0):>4} {t.over_bound:>6} "
            f"{t.blamed:>6}/{t.exact}"
        )


if __name__ == "__main__":
    main()
