"""Replay a repository's history through the file-consistency check, file level against function
level, on a pair of Python files that are meant to stay in step.

    python benchmarks/consistency_replay.py --repo PATH [--pair A B]... [--similarity 0.75]

PATH is a clone or a bare snapshot; by default the pair is NeMo-RL's two DTensor policy workers
at both of their past locations (`nemo_rl/models/policy/` and `.../policy/workers/`), so point
it at `NVIDIA-NeMo/RL`. Each first-parent commit that touched the pair is checked as a PR from
its parent would be, the files read with git exactly as `cpci consistency` reads them, the
commit's subject standing for the PR's title (a `fix:` subject is a fix). Per commit it prints
the file-level finding, each function-level drift (the function, its twin, and whether the
suggested patch applies to the twin at the commit, checked with `git apply --check`), and the
changed functions that did not warn; then totals. Nothing is asserted: the figures are for
reading, not for gating CI.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from cpci.github.consistency import Finding, evaluate
from cpci.github.drift import FunctionDrift
from cpci.github.gitdiff import blob_at, changed_files
from cpci.github.pair_files import GitPairReader
from cpci.github.rules import DEFAULT_SIMILARITY, Rule, RuleSet

WORKERS = "nemo_rl/models/policy/{}dtensor_policy_worker{}.py"
NEMO_RL_PAIRS = [
    (WORKERS.format("workers/", ""), WORKERS.format("workers/", "_v2")),
    (WORKERS.format("", ""), WORKERS.format("", "_v2")),
]


@dataclass
class Totals:
    commits: int = 0
    skipped: int = 0  # the pair was not there yet at the parent
    file_warned: int = 0
    function_warned: int = 0
    fixes_raised: int = 0
    functions: int = 0
    one_sided: int = 0
    diverged: int = 0
    patches: int = 0
    applied: int = 0
    no_patch: int = 0  # the change did not merge into the twin
    removed: int = 0  # the function was removed on one side: no patch is offered
    file_level_fallbacks: list[str] = field(default_factory=list)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def applies(repo: Path, commit: str, drift: FunctionDrift) -> bool:
    """Whether the drift's patch applies to the twin's file at `commit` (`git apply --check`
    in a scratch repository holding that one file)."""
    assert drift.patch is not None
    data = blob_at(commit, drift.twin.path, repo)
    assert data is not None, f"{drift.twin.path} missing at {commit}"
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        target = root / drift.twin.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        (root / "twin.patch").write_text(drift.patch, encoding="utf-8")
        done = subprocess.run(
            ["git", "-C", str(root), "apply", "--check", "twin.patch"], capture_output=True
        )
        return done.returncode == 0


def pair_at(repo: Path, commit: str, pairs: list[tuple[str, str]]) -> tuple[str, str] | None:
    for pair in pairs:
        if all(blob_at(commit, path, repo) is not None for path in pair):
            return pair
    return None


def replay(repo: Path, ref: str, pairs: list[tuple[str, str]], similarity: float) -> Totals:
    paths = sorted({p for pair in pairs for p in pair})
    log = git(
        repo,
        "log",
        "--first-parent",
        "--reverse",
        "--format=%H %h %ad %s",
        "--date=short",
        ref,
        "--",
        *paths,
    )
    totals = Totals()
    for entry in log.splitlines():
        commit, short, date, subject = entry.split(" ", 3)
        parent = f"{commit}^"
        pair = pair_at(repo, parent, pairs)
        if pair is None:
            totals.skipped += 1
            print(f"{short} {date} (the pair is not there before this commit) {subject[:70]}")
            continue
        totals.commits += 1
        files = changed_files(parent, commit, repo)
        reader = GitPairReader(repo, parent, commit)
        by_file = Rule("workers", pair, granularity="file")
        by_function = Rule("workers", pair, granularity="function", similarity=similarity)
        [file_result, function_result] = [
            evaluate(RuleSet((rule,)), files, reader=reader, title=subject)
            for rule in (by_file, by_function)
        ]
        file_finding = next(iter(file_result.findings), None)
        finding = next(iter(function_result.findings), None)
        totals.file_warned += file_finding is not None
        print(
            f"{short} {date} file: {file_finding.level if file_finding else '-':4} "
            f"function: {finding.level if finding else '-':4} {subject[:70]}"
        )
        if finding is not None:
            count(repo, commit, finding, totals)
    return totals


def count(repo: Path, commit: str, finding: Finding, totals: Totals) -> None:
    if finding.file_level_because:
        totals.file_level_fallbacks.append(f"{commit[:9]}: {finding.file_level_because}")
        print(f"    checked file by file: {finding.file_level_because}")
        return
    totals.function_warned += bool(finding.drifts)
    totals.fixes_raised += bool(finding.raised_by)
    totals.one_sided += len(finding.one_sided)
    totals.diverged += len(finding.diverged)
    for drift in finding.drifts:
        totals.functions += 1
        if drift.change == "removed":
            totals.removed += 1
            verdict = "removed here: no patch, the twin's callers decide"
        elif drift.patch is None:
            totals.no_patch += 1
            verdict = "no patch: the change does not merge into the twin"
        else:
            totals.patches += 1
            ok = applies(repo, commit, drift)
            totals.applied += ok
            verdict = "patch applies" if ok else "PATCH DOES NOT APPLY"
        print(
            f"    {drift.level}: {drift.function.qualname} -> {drift.twin.qualname} "
            f"({drift.similarity:.0%} alike before; {verdict})"
        )
    if finding.one_sided or finding.diverged:
        print(
            f"    not warned: {len(finding.one_sided)} on one side only "
            f"{finding.one_sided[:4]}, {len(finding.diverged)} whose twin had diverged "
            f"{finding.diverged[:4]}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help="a clone or a bare snapshot")
    parser.add_argument("--ref", default="HEAD", help="the history to replay (default HEAD)")
    parser.add_argument(
        "--pair",
        nargs=2,
        action="append",
        metavar=("A", "B"),
        help="two paths to keep in step (repeatable: each past location)",
    )
    parser.add_argument("--similarity", type=float, default=DEFAULT_SIMILARITY)
    args = parser.parse_args()
    pairs = [(a, b) for a, b in args.pair] if args.pair else NEMO_RL_PAIRS
    started = time.perf_counter()
    t = replay(args.repo, args.ref, pairs, args.similarity)
    seconds = time.perf_counter() - started

    def share(n: int) -> str:
        return f"{n} ({n / t.commits:.0%})" if t.commits else str(n)

    print()
    print(f"commits that touched the pair: {t.commits} (+{t.skipped} before it existed)")
    print(f"warned at file level:          {share(t.file_warned)}")
    print(
        f"warned at function level:      {share(t.function_warned)}"
        f" ({t.fixes_raised} raised to fail as fixes)"
    )
    print(f"functions named:               {t.functions}")
    print(
        f"patches suggested:             {t.patches}, applied with git apply: {t.applied}; "
        f"no patch: {t.no_patch} (the change does not merge), {t.removed} (removed)"
    )
    print(
        f"changed functions not warned:  {t.one_sided} on one side only, "
        f"{t.diverged} whose twin had diverged"
    )
    print(f"checked file by file instead:  {len(t.file_level_fallbacks)}")
    each = seconds / max(t.commits, 1)
    print(f"similarity {args.similarity}; {seconds:.1f} s ({each:.2f} s a commit)")


if __name__ == "__main__":
    main()
