"""Seeded synthetic CI histories whose truth is known: the instrument that measures verdicts.

A verdict is only worth what it gets right on histories like the real ones, so this module
writes such a history with its answers: N configs (CP-suite names at world sizes 2 and 4), each
with a true failure rate (most 0; a share flaky at 0.05-0.3 with one or two failure signatures;
a few broken on main for a stretch), M main runs on a first-parent chain of commits (a share of
them, like a nightly job, without reruns: single attempts that flake), and P pull requests
based on main commits, with injected regressions (some in flaky configs, one of them whose single
attempt at the base failed by chance, some a segfault whose surviving rank reports an NCCL
error), poisoning uploads from other PRs and from untrusted branches (a `wip` run at the base
commit, flip-flops on a feature branch's own commits), a missing shard, configs that never ran
and order-dependent ones. With reruns on, a failing config is run up to 3 times in the same
upload, stopping at the first pass (which is then `flaky: true`).

`build_corpus(spec)` is deterministic in `spec.seed`; `verdict_play.play` sends its steps to a
real service and `verdict_score.score` compares what the service said with the truth here.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import product
from typing import Literal

from cpci.schema import Environment, ResultRecord, RunEnvelope, config_key
from tests import builders
from tests.server.verdict_records import (
    ATTEMPTS_WITH_RERUNS,
    BROKEN_SIGNATURE,
    FLAKY_SIGNATURES,
    REGRESSION_SIGNATURE,
    Failure,
    attempts,
    crash,
    failure,
    never_ran,
    order_dependent,
    record,
    red,
)

REPO = builders.REPO
ENVIRONMENT = Environment(torch="2.4.0", cuda="12.4", nccl="2.21.5", gpu="H100", backend="nccl")

COMMS = ("p2p", "all_gather", "a2a", "a2a+p2p")
DTYPES = ("bf16", "fp16", "fp8")
MASKS = ("causal", "no_mask", "padding")
SUITES: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...] = (
    ("tests/test_cp.py::test_attn", (COMMS, DTYPES, MASKS)),
    ("tests/test_cp_layouts.py::test_layout", (COMMS, ("bshd", "sbhd", "thd"), DTYPES)),
    ("tests/test_cp_gqa.py::test_gqa", (COMMS, MASKS, ("g2", "g4", "g8"))),
    ("tests/test_cp_varlen.py::test_varlen", (COMMS, ("s1k", "s4k", "s16k", "mixed"), DTYPES[:2])),
)
WORLD_SIZES = (2, 4)

RegressionKind = Literal[
    "clean", "flaky-usual-signature", "flaky-new-signature", "crash", "flaky-base-failed"
]
REGRESSION_KINDS: tuple[RegressionKind, ...] = (
    "clean",
    "flaky-usual-signature",
    "flaky-new-signature",
    "crash",
    "flaky-base-failed",  # a flaky config whose one attempt at the base failed by chance
)
PoisonKind = Literal[
    "flaky-record-other-head",
    "pass-other-head",
    "pass-same-commit",
    "flaky-record-same-commit",
    "untrusted-branch-fails-at-base",
    "untrusted-branch-flip-flops",
]
POISON_KINDS: tuple[PoisonKind, ...] = (
    "flaky-record-other-head",
    "pass-other-head",
    "pass-same-commit",
    "flaky-record-same-commit",
    "untrusted-branch-fails-at-base",  # a `wip` branch run at the base commit, failing it
    "untrusted-branch-flip-flops",  # six runs of a `wip` branch flipping it, on wip's commits
)
#: Runs of the flip-flopping untrusted branch: enough history to label a config flaky.
FLIP_FLOP_RUNS = 6
#: What a config really is at a PR's head; the scorer compares each verdict with this. A flaky
#: config that failed every attempt by chance (p^3 with reruns, p without) is told apart from
#: one where a rerun passed: no verdict can tell the former from a regression.
HeadTruth = Literal[
    "regression",
    "flaky_failure",
    "flaky_every_attempt",
    "broken_at_base",
    "not_run",
    "order_dependent",
    "passed",
    "missing",
]


@dataclass(frozen=True)
class CorpusSpec:
    """The corpus's size and shape; everything else follows from `seed`."""

    configs: int = 200
    main_runs: int = 40
    prs: int = 40
    shards: int = 4
    seed: int = 1
    reruns: bool = True
    flaky_share: float = 0.2
    broken_share: float = 0.03
    recall_window: int = 20
    single_attempt_share: float = 0.25  # main runs without reruns (a nightly job), reruns on

    def __post_init__(self) -> None:
        most = len(all_config_names())
        if not 4 <= self.configs <= most:
            raise ValueError(f"configs must be in 4..{most}, got {self.configs}")
        if self.main_runs < 2 or self.prs < 0 or not 1 <= self.shards <= self.configs:
            raise ValueError(
                f"need main_runs >= 2, prs >= 0 and 1 <= shards <= configs, got "
                f"main_runs={self.main_runs}, prs={self.prs}, shards={self.shards}"
            )
        if not (
            self.flaky_share > 0
            and self.broken_share > 0
            and self.flaky_share + self.broken_share < 1
        ):
            raise ValueError(
                f"flaky_share and broken_share must be > 0 and leave clean configs, got "
                f"{self.flaky_share} and {self.broken_share}"
            )
        if self.recall_window < 1:
            raise ValueError(f"recall_window must be >= 1 main run, got {self.recall_window}")
        if not 0 <= self.single_attempt_share < 1:
            raise ValueError(
                f"single_attempt_share must be in [0, 1), got {self.single_attempt_share}"
            )


@dataclass(frozen=True)
class ConfigTruth:
    """One config and how it really behaves."""

    nodeid: str
    world_size: int
    shard: int
    rate: float  # chance that one attempt fails, outside a broken stretch
    signatures: tuple[str, ...]  # the messages its flaky failures carry
    broken: tuple[int, int] | None  # main runs [start, end) on which it fails every attempt

    @property
    def key(self) -> str:
        return config_key(self.nodeid, self.world_size)

    def broken_at(self, main_run: int) -> bool:
        return self.broken is not None and self.broken[0] <= main_run < self.broken[1]


@dataclass(frozen=True)
class Regression:
    """A config a PR really broke: it fails at the PR's head on every attempt."""

    config: str
    kind: RegressionKind
    attempts_failed: int


@dataclass(frozen=True)
class Poison:
    """Another PR's upload, or an untrusted branch's runs, that would hide `target`'s
    regression in `config` if it counted."""

    target: int
    by: int
    config: str
    kind: PoisonKind


@dataclass(frozen=True)
class PullRequestTruth:
    """A PR, what it broke, and what each config really is at its head."""

    number: int
    base_run: int  # index of the main run (and commit) it is based on
    head_commit: str
    partial: bool  # one shard never uploaded: the report must stay pending
    head: Mapping[str, HeadTruth]
    regressions: tuple[Regression, ...]
    poisons: tuple[Poison, ...]


@dataclass(frozen=True)
class Upload:
    """One shard's envelope, as `cpci upload` sends it."""

    envelope: RunEnvelope


@dataclass(frozen=True)
class RecordAncestry:
    """First-parent links of main, as a branch job records them."""

    links: tuple[tuple[str, str], ...]  # (commit, first parent)


@dataclass(frozen=True)
class ReadFlakyList:
    """Read the flaky list now: `main_runs` main runs (and nothing else) are in."""

    main_runs: int


@dataclass(frozen=True)
class ReadReport:
    """Read PR `number`'s report now, as the bot would after its last shard."""

    number: int


Step = Upload | RecordAncestry | ReadFlakyList | ReadReport


@dataclass(frozen=True)
class Corpus:
    """The history's truth and its steps: uploads and reads, in the order CI makes them."""

    spec: CorpusSpec
    configs: tuple[ConfigTruth, ...]
    main_commits: tuple[str, ...]
    pulls: tuple[PullRequestTruth, ...]
    steps: tuple[Step, ...]
    failed_in_window: frozenset[str]  # configs that failed at least once in the recall window

    @property
    def uploads(self) -> int:
        return sum(isinstance(s, Upload) for s in self.steps)


@dataclass
class _Builder:
    """Holds the seed's random streams; one stream per part, so parts do not shift each other."""

    spec: CorpusSpec
    configs: tuple[ConfigTruth, ...] = ()
    steps: list[Step] = field(default_factory=list)
    single_attempt_runs: set[int] = field(default_factory=set)  # main runs without reruns
    base_failures: set[tuple[int, str]] = field(default_factory=set)  # (main run, config key)

    def rng(self, *parts: object) -> random.Random:
        return random.Random(":".join(map(str, (self.spec.seed, *parts))))


def all_config_names() -> list[tuple[str, int]]:
    """Every (nodeid, world size) the corpus can draw from, shaped like real CP suites."""
    names = []
    for base, axes in SUITES:
        for values in product(*axes):
            for world_size in WORLD_SIZES:
                names.append((f"{base}[{'-'.join(values)}]", world_size))
    return names


def sha(*parts: object) -> str:
    return hashlib.sha1(":".join(map(str, parts)).encode()).hexdigest()


def build_corpus(spec: CorpusSpec) -> Corpus:
    """The whole history, its truth and the order of its uploads and reads."""
    b = _Builder(spec)
    b.configs = _configs(b)
    if spec.reruns:
        nightly = b.rng("single-attempt-runs")
        b.single_attempt_runs = {
            k for k in range(spec.main_runs) if nightly.random() < spec.single_attempt_share
        }
    main = tuple(sha(spec.seed, "main", k) for k in range(spec.main_runs))
    window = min(spec.recall_window, spec.main_runs)
    plans = _plans(b)
    # Only branch jobs record ancestry (a PR's own credential may not): the main chain.
    b.steps.append(RecordAncestry(tuple(zip(main[1:], main[:-1], strict=True))))
    failed: set[str] = set()
    pulls: list[PullRequestTruth] = []
    for k, commit in enumerate(main):
        records = [_mainattempts(b, c, k) for c in b.configs]
        if k < window:
            failed.update(c.key for c, rs in zip(b.configs, records, strict=True) if red(rs))
        _upload_shards(b, records, commit=commit, ci_run_id=str(10_000 + k), branch="main")
        if k == window - 1:
            b.steps.append(ReadFlakyList(window))
        pulls += [_play_pull(b, p, main) for p in plans if max(p.base_run, window - 1) == k]
    pulls.sort(key=lambda p: p.number)
    return Corpus(spec, b.configs, main, tuple(pulls), tuple(b.steps), frozenset(failed))


def _configs(b: _Builder) -> tuple[ConfigTruth, ...]:
    spec, rng = b.spec, b.rng("configs")
    names = sorted(rng.sample(all_config_names(), spec.configs))
    order = list(range(spec.configs))
    rng.shuffle(order)
    n_flaky = max(1, round(spec.configs * spec.flaky_share))
    n_broken = max(1, round(spec.configs * spec.broken_share))
    flaky, broken = set(order[:n_flaky]), set(order[n_flaky : n_flaky + n_broken])
    out = []
    for i, (nodeid, world_size) in enumerate(names):
        rate, stretch = 0.0, None
        signatures: tuple[str, ...] = ()
        if i in flaky:
            rate = round(rng.uniform(0.05, 0.3), 3)
            picked = rng.sample(FLAKY_SIGNATURES, 2 if rng.random() < 0.35 else 1)
            signatures = tuple(
                s.format(n=rng.randrange(1, 900), d=rng.uniform(1e-3, 5e-2), r=world_size - 1)
                for s in picked
            )
        elif i in broken:
            start = rng.randrange(0, spec.main_runs - 1)
            stretch = (
                start,
                min(spec.main_runs, start + rng.randint(2, max(2, spec.main_runs // 5))),
            )
        out.append(ConfigTruth(nodeid, world_size, i % spec.shards, rate, signatures, stretch))
    return tuple(out)


def _flaky_draw(c: ConfigTruth, rng: random.Random) -> Callable[[int], Failure | None]:
    def draw(_: int) -> Failure | None:
        if c.rate and rng.random() < c.rate:
            return failure(rng.choice(c.signatures), rng.randrange(c.world_size))
        return None

    return draw


def _broken(c: ConfigTruth) -> Failure:
    return failure(BROKEN_SIGNATURE.format(n=c.world_size * 1024), 0)


def _mainattempts(b: _Builder, c: ConfigTruth, k: int) -> list[ResultRecord]:
    reruns = b.spec.reruns and k not in b.single_attempt_runs
    if c.broken_at(k):
        return attempts(c, lambda _: _broken(c), reruns)
    if (k, c.key) in b.base_failures:  # a flake's chance failure, planned for a PR's base
        rng = b.rng("base-failure", k, c.key)
        return attempts(c, lambda _: failure(c.signatures[0], rng.randrange(c.world_size)), False)
    return attempts(c, _flaky_draw(c, b.rng("main", k, c.key)), reruns)


def _upload_shards(
    b: _Builder,
    records: Sequence[Sequence[ResultRecord]],
    *,
    commit: str,
    ci_run_id: str,
    branch: str,
    pull_request: int | None = None,
    base_commit: str | None = None,
    base_branch: str | None = None,
    skip_shard: int | None = None,
) -> None:
    """One CI run: each shard's records in one envelope, shards in order."""
    for shard in range(b.spec.shards):
        if shard == skip_shard:
            continue
        results = [
            r for c, rs in zip(b.configs, records, strict=True) if c.shard == shard for r in rs
        ]
        envelope = builders.envelope(
            commit=commit,
            branch=branch,
            pull_request=pull_request,
            base_commit=base_commit,
            base_branch=base_branch,
            ci_run_id=ci_run_id,
            shard_index=shard,
            shard_total=b.spec.shards,
            runner_name=f"gpu-runner-{shard}",
            runner_labels=["self-hosted", "gpu"],
            environment=ENVIRONMENT,
            results=results,
        )
        b.steps.append(Upload(envelope))


def _plans(b: _Builder) -> tuple[PullRequestTruth, ...]:
    """Each PR's role, cycled so that even a small corpus has every case at least once; `head`
    holds only the planned cases until `_play_pull` draws the rest."""
    spec = b.spec
    pulls = []
    for j in range(spec.prs):
        rng = b.rng("pull", j)
        number = 1 + j
        base_run = rng.randrange(spec.main_runs // 2, spec.main_runs)
        head = sha(spec.seed, "pull", number)
        usable = [c for c in b.configs if not c.broken_at(base_run)]
        clean = [c for c in usable if c.rate == 0]
        flaky = [c for c in usable if c.rate > 0]
        rng.shuffle(clean)
        rng.shuffle(flaky)
        kinds = [REGRESSION_KINDS[j % len(REGRESSION_KINDS)]]
        if rng.random() < 0.4:
            kinds.append(rng.choice(REGRESSION_KINDS))
        poison_kind: PoisonKind | None = POISON_KINDS[j % len(POISON_KINDS)]
        if poison_kind is not None and "clean" not in kinds:
            kinds.append("clean")
        attempts = ATTEMPTS_WITH_RERUNS if spec.reruns else 1
        regressions: list[Regression] = []
        for kind in kinds:
            pool = flaky if kind.startswith("flaky") else clean
            if pool:
                regressions.append(Regression(pool.pop().key, kind, attempts))
                if kind == "flaky-base-failed":
                    b.base_failures.add((base_run, regressions[-1].config))
                    b.single_attempt_runs.add(base_run)
        truth: dict[str, HeadTruth] = {r.config: "regression" for r in regressions}
        if j % 3 == 0 and clean:
            truth[clean.pop().key] = "not_run"
        if j % 3 == 1 and clean:
            truth[clean.pop().key] = "order_dependent"
        poisons: tuple[Poison, ...] = ()
        target = next((r for r in regressions if r.kind == "clean"), None)
        if poison_kind is not None and target is not None:
            poisons = (Poison(number, 1_000 + number, target.config, poison_kind),)
        partial = j % 8 == 7
        pulls.append(
            PullRequestTruth(number, base_run, head, partial, truth, tuple(regressions), poisons)
        )
    return tuple(pulls)


def _play_pull(b: _Builder, pull: PullRequestTruth, main: Sequence[str]) -> PullRequestTruth:
    """The poisoning uploads, then the PR's own shards (its head truth completed), then a read."""
    for poison in pull.poisons:
        _poison(b, pull, poison, main)
    rng = b.rng("pull-head", pull.number)
    missing = rng.randrange(b.spec.shards) if pull.partial else None
    regressions = {r.config: r for r in pull.regressions}
    records = []
    head: dict[str, HeadTruth] = dict(pull.head)
    for c in b.configs:
        rs = _headattempts(b, c, pull, regressions.get(c.key), rng)
        records.append(rs)
        if c.shard == missing:
            head[c.key] = "missing"
        elif c.key not in head:
            head[c.key] = _head_truth(c, pull, rs)
    _upload_shards(
        b,
        records,
        commit=pull.head_commit,
        ci_run_id=str(20_000 + pull.number),
        branch=f"feature-{pull.number}",
        pull_request=pull.number,
        base_commit=main[pull.base_run],
        base_branch="main",
        skip_shard=missing,
    )
    b.steps.append(ReadReport(pull.number))
    return replace(pull, head=head)


def _head_truth(
    c: ConfigTruth, pull: PullRequestTruth, records: Sequence[ResultRecord]
) -> HeadTruth:
    if c.broken_at(pull.base_run):
        return "broken_at_base"
    if not red(records):
        return "passed"
    return "flaky_failure" if records[-1].outcome == "passed" else "flaky_every_attempt"


def _headattempts(
    b: _Builder,
    c: ConfigTruth,
    pull: PullRequestTruth,
    regression: Regression | None,
    rng: random.Random,
) -> list[ResultRecord]:
    truth = pull.head.get(c.key)
    if truth == "not_run":
        return never_ran(c)
    if truth == "order_dependent":
        return order_dependent(c)
    if regression is not None:
        caused = _regressionfailure(c, regression.kind, rng)
        return attempts(c, lambda _: caused, b.spec.reruns)
    if c.broken_at(pull.base_run):
        return attempts(c, lambda _: _broken(c), b.spec.reruns)
    return attempts(c, _flaky_draw(c, rng), b.spec.reruns)


def _regressionfailure(c: ConfigTruth, kind: RegressionKind, rng: random.Random) -> Failure:
    if kind == "flaky-usual-signature":
        return failure(c.signatures[0], rng.randrange(c.world_size))
    if kind == "crash":
        return crash(c.world_size, culprit=rng.randrange(c.world_size))
    return failure(REGRESSION_SIGNATURE.format(d=rng.uniform(0.1, 3.0)), 0)


def _poison(b: _Builder, pull: PullRequestTruth, poison: Poison, main: Sequence[str]) -> None:
    c = next(c for c in b.configs if c.key == poison.config)
    if poison.kind.startswith("untrusted-branch"):
        _untrusted_branch(b, pull, poison, c, main)
        return
    if poison.kind.startswith("flaky-record"):
        poisoned = record(c, "passed", 2, flaky=True)
    else:
        poisoned = record(c, "passed", 1)
    same = poison.kind.endswith("same-commit")
    envelope = builders.envelope(
        commit=pull.head_commit if same else sha(b.spec.seed, "poison", poison.by),
        branch=f"feature-{poison.by}",
        pull_request=poison.by,
        base_commit=main[pull.base_run],
        ci_run_id=str(30_000 + poison.by),
        environment=ENVIRONMENT,
        results=[poisoned],
    )
    b.steps.append(Upload(envelope))


def _untrusted_branch(
    b: _Builder, pull: PullRequestTruth, poison: Poison, c: ConfigTruth, main: Sequence[str]
) -> None:
    """Branch runs of `wip-N` (uploaded with the branch token, as a repository that runs CI on
    every pushed branch would): one at the PR's base commit in which the target fails, or six
    on the branch's own commits in which it fails and passes by turns."""
    wip = f"wip-{poison.by}"
    message = REGRESSION_SIGNATURE.format(d=1.5)
    if poison.kind == "untrusted-branch-fails-at-base":
        runs = [(main[pull.base_run], [record(c, "failed", 1, failure(message, 0).errors)])]
    else:
        runs = [
            (
                sha(b.spec.seed, wip, n),
                [record(c, "failed", 1, failure(message, 0).errors)]
                if n % 2 == 0
                else [record(c, "passed", 1)],
            )
            for n in range(FLIP_FLOP_RUNS)
        ]
    for n, (commit, results) in enumerate(runs):
        envelope = builders.envelope(
            commit=commit,
            branch=wip,
            ci_run_id=str(40_000 + 10 * poison.by + n),
            environment=ENVIRONMENT,
            results=results,
        )
        b.steps.append(Upload(envelope))
