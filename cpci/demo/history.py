"""The demo's story: four commits on main, then a pull request on top of the newest.

Each commit is run for real (the bundled CP suite with the faults of `cpci.demo.faults` that the
commit carries), so the dashboard's pass-rate trend, each config's timeline and the flaky list
have a history to show:

- `main~3`: clean;
- `main~2`: the flaky config fails once and passes on its rerun (same-commit flaky evidence);
- `main~1`: the flaky config passes, but slower (`slow`);
- `main`: the whole suite as 2 shards; the flaky config flakes again;
- PR #1 (based on `main`): the whole suite as 2 shards, with the ring-balance regression (and
  the flaky config flaking).

The three older commits run a fixed subset, the 2-rank `test_cp2` family (108 of the suite's 181
configs, the flaky one among them): most of a run's cost is fixed (an interpreter, collection, the
ranks' preloaded interpreter, a world per world size; measured: about 9 CPU-s for this subset, 17
to 19 for each shard of the whole suite), and one world size means one world. The newest main
commit and the PR run the whole suite as 2 shards, as CI would, so the PR is compared with a
complete base.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass

REPOSITORY = "demo/cp-attention"
PR_NUMBER = 1
#: Shards of a whole-suite run, each uploaded as one CI job would.
SHARDS = 2
#: The older commits' subset (`-k`): one module, one world size.
SUBSET = "test_algorithms and test_cp2"
#: A 2-rank config that flakes at some commits (the flaky list's entry, its timeline linked).
#: The first of its world's queue in the subset, and early in its shard: a config that passes
#: alone after failing in a shared world is replayed after its predecessors (to tell flaky from
#: order-dependent), and few predecessors keep that replay short.
FLAKY = "test_cp2[all_gather-causal-ht-fp32-bshd-mha]"


def _sha(label: str) -> str:
    """A made-up but stable commit id per label (the demo has no git history of its own)."""
    return hashlib.sha1(f"cpci demo {label}".encode()).hexdigest()


@dataclass(frozen=True)
class Commit:
    """One commit of the story and how its CI run runs the suite."""

    label: str
    sha: str
    #: Not a number: GitHub never ran these, so their pages link no GitHub run.
    run_id: str
    faults: str
    branch: str
    #: A `-k` expression selecting the configs this run runs; empty: the whole suite.
    keyword: str = ""
    shards: int = 1
    pull_request: int | None = None
    base: str | None = None


def _main_commits() -> tuple[Commit, ...]:
    older = [
        ("main~3", ""),
        ("main~2", f"flaky={FLAKY}"),
        ("main~1", f"slow={FLAKY}"),
    ]
    commits = [
        Commit(label, _sha(label), f"demo-{1001 + i}", faults, "main", keyword=SUBSET)
        for i, (label, faults) in enumerate(older)
    ]
    commits.append(
        Commit("main", _sha("main"), "demo-1004", f"flaky={FLAKY}", "main", shards=SHARDS)
    )
    return tuple(commits)


MAIN = _main_commits()
BASE = MAIN[-1]
PULL = Commit(
    f"PR #{PR_NUMBER}",
    _sha("pr"),
    "demo-1005",
    f"ring-balance,flaky={FLAKY}",
    "fix-ring",
    shards=SHARDS,
    pull_request=PR_NUMBER,
    base=BASE.sha,
)
#: Oldest first: the order the runs are uploaded in (the dashboard lists runs by upload).
HISTORY = (*MAIN, PULL)


def first_parent_links() -> list[tuple[str, str]]:
    """(commit, parent) links of main, so the service knows the order of its commits."""
    return [(child.sha, parent.sha) for parent, child in itertools.pairwise(MAIN)]
