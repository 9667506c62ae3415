"""The grid: every config of a branch across its recent commits, one row each, worst first.

What PyTorch developers open first on HUD: which configs are red, since when, and whether red
means this commit, an older one or a flake. A cell is the config's state at one commit (every
attempt of every CI run there, as the config page's timeline draws it); a row's verdict is its
newest result against the one before it on the branch; flaky is the dashboard's label (the
flakiness assessment of configs that failed in these columns), quarantined is an open quarantine.

Thousands of configs stay cheap: the matrix is read once per set of shards (stored shards never
change, `ShardCache.of_shards`) and the flaky labels once per repository version; filtering and
paging run over that in memory, so a page costs its rows, not the branch's history.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session

from cpci import urls
from cpci.server.analysis.verdicts import ResultView, state_of
from cpci.server.core.policies import PullReportPolicy
from cpci.server.crud.common import fetch_rows, from_json, one_of
from cpci.server.crud.quarantine import open_quarantines
from cpci.server.crud.shard_cache import ShardCache, repository_version
from cpci.server.models import Quarantine, Repository, as_utc
from cpci.server.packed import ISOLATION_NAME, OUTCOME_NAME
from cpci.server.views.dashboard import branch_runs, default_view_branch
from cpci.server.views.flaky import MAX_CANDIDATES, assess_configs
from cpci.server.views.read_models import (
    Grid,
    GridColumn,
    GridMark,
    GridRow,
    GridState,
    GridVerdict,
)
from cpci.urls import Links

#: Commits shown by default, and the most a reader may ask for.
COMMITS, MAX_COMMITS = 30, 100
#: Rows per page by default, and the most one page holds.
PER_PAGE, MAX_PER_PAGE = 500, 5000
#: Rows in the order a reader acts on them: what broke last first.
ORDER: tuple[GridVerdict, ...] = (
    "new_failure",
    "broken",
    "flaky",
    "no_baseline",
    "fixed",
    "passed",
    "skipped",
)
_RANK: dict[str, int] = {v: i for i, v in enumerate(ORDER)}
_FAILING: frozenset[GridState] = frozenset({"fail", "mixed"})


@dataclass(frozen=True)
class GridFilter:
    """What the reader narrowed the grid to: a part of the config id, parameter terms (each a
    part of some `name=value`), states any of its cells must have, verdicts or markers."""

    query: str = ""
    param: str = ""
    outcomes: Sequence[GridState] = ()
    verdicts: Sequence[GridVerdict | GridMark] = ()

    def keeps(self, row: _Judged) -> bool:
        if self.query and self.query.lower() not in row.key.lower():
            return False
        if self.param:
            pairs = [f"{k}={v}".lower() for k, v in row.params.items()]
            if not all(any(t in p for p in pairs) for t in self.param.lower().split()):
                return False
        if self.outcomes and not set(self.outcomes) & set(row.states):
            return False
        if self.verdicts:
            marks = {row.verdict, *(("quarantined",) if row.quarantined else ())}
            return bool(marks & set(self.verdicts))
        return True


@dataclass(frozen=True, slots=True)
class _Judged:
    """A row before it is a `GridRow`: thousands are filtered and sorted, one page is built."""

    key: str
    params: dict[str, Any]
    states: list[GridState]
    verdict: GridVerdict
    since: int | None  # for `broken`: the column its failing streak began at
    flaky: bool
    quarantined: str | None


@dataclass(frozen=True)
class _Matrix:
    """Each config's state per column (config pk -> states, newest first), and its id and
    parameters: the part of the grid that only new shards can change."""

    columns: list[str]  # commits, newest first
    states: dict[int, list[GridState]]
    keys: dict[int, str]
    params: dict[int, dict[str, Any]]


def build_grid(
    *,
    session: Session,
    repo: Repository,
    branch: str | None,
    policy: PullReportPolicy,
    links: Links,
    cache: ShardCache,
    commits: int = COMMITS,
    where: GridFilter = GridFilter(),
    page: int = 1,
    per_page: int = PER_PAGE,
) -> Grid:
    """The grid of `branch` (None: the one pages show first) over its newest `commits` commits,
    filtered by `where`, page `page` of `per_page` rows."""
    assert repo.id is not None
    branch = branch or default_view_branch(session=session, repo=repo, trusted=policy.trusted)
    # A commit may hold several CI runs: read enough runs to fill the columns.
    merged = branch_runs(session=session, repo=repo, branch=branch, limit=commits * 2)
    runs_at: dict[str, list[int]] = {}  # commit -> its runs' shard ids, newest commit first
    columns: list[GridColumn] = []
    for m in merged:
        commit = m.latest.commit
        if commit not in runs_at:
            if len(columns) == commits:
                continue
            runs_at[commit] = []
            columns.append(
                GridColumn(
                    commit=commit,
                    ci_run_id=m.latest.ci_run_id,
                    created_at=as_utc(m.latest.created_at),
                    page_url=urls.run(repo.name, m.latest.ci_run_id),
                )
            )
        runs_at[commit].extend(s.id for s in m.uploads if s.id is not None)
    shard_ids = [sid for ids in runs_at.values() for sid in ids]
    matrix = cache.of_shards(
        "grid", shard_ids, lambda: _matrix(session, runs_at), variant=tuple(runs_at)
    )
    failed = sorted(pk for pk, states in matrix.states.items() if _FAILING & set(states))
    version = repository_version(session=session, repo_id=repo.id)
    flaky = cache.remember(
        ("grid-flaky", repo.id, branch, policy.lookback.window, tuple(runs_at)),
        version,
        lambda: _flaky(session, repo, branch, failed, policy, links),
    )
    held = open_quarantines(session=session, repo_id=repo.id)
    rows = [_judge(matrix, pk, pk in flaky, held.get(matrix.keys[pk])) for pk in matrix.states]
    rows.sort(key=lambda r: (_RANK[r.verdict], r.key))
    kept = [r for r in rows if where.keeps(r)]
    pages = max(1, -(-len(kept) // per_page))
    page = min(page, pages)
    counts = Counter(r.verdict for r in rows)
    return Grid(
        repository=repo.name,
        branch=branch,
        columns=columns,
        rows=[_row(repo.name, columns, r) for r in kept[(page - 1) * per_page : page * per_page]],
        verdicts={v: counts[v] for v in ORDER if counts[v]},
        configs=len(rows),
        matching=len(kept),
        query=where.query,
        param=where.param,
        outcome_filter=list(where.outcomes),
        verdict_filter=list(where.verdicts),
        page=page,
        pages=pages,
        per_page=per_page,
    )


def _matrix(session: Session, runs_at: dict[str, list[int]]) -> _Matrix:
    """One read of the columns' results (every attempt), folded into a state per commit."""
    column_of = {sid: i for i, ids in enumerate(runs_at.values()) for sid in ids}
    views: dict[tuple[int, int], list[ResultView]] = defaultdict(list)
    member, values = one_of(session, list(column_of))
    sql = (
        f"SELECT config_id, shard_id, outcome, flaky, isolation FROM result WHERE shard_id{member}"
    )
    for pk, sid, outcome, flaky, isolation in fetch_rows(session, sql, values):
        views[(pk, column_of[sid])].append(
            ResultView(
                OUTCOME_NAME[outcome], flaky=bool(flaky), isolation=ISOLATION_NAME[isolation]
            )
        )
    states: dict[int, list[GridState]] = {}
    for (pk, column), found in views.items():
        states.setdefault(pk, [""] * len(runs_at))[column] = state_of(found)
    member, values = one_of(session, list(states))
    sql = f"SELECT id, key, params FROM config WHERE id{member}"
    keys: dict[int, str] = {}
    params: dict[int, dict[str, Any]] = {}
    for pk, key, raw in fetch_rows(session, sql, values):
        keys[pk] = key
        params[pk] = from_json(raw) or {}
    return _Matrix(columns=list(runs_at), states=states, keys=keys, params=params)


def _flaky(
    session: Session,
    repo: Repository,
    branch: str | None,
    failed: list[int],
    policy: PullReportPolicy,
    links: Links,
) -> frozenset[int]:
    """The configs that failed in the columns and that their history labels flaky (the most
    assessed, as the flaky list's, is `MAX_CANDIDATES`)."""
    found = assess_configs(
        session=session,
        repo=repo,
        branch=branch,
        config_pks=failed[:MAX_CANDIDATES],
        flakiness=policy.flakiness,
        window=policy.lookback.window,
        links=links,
    )
    return frozenset(f.config_pk for f in found)


def _judge(matrix: _Matrix, pk: int, flaky: bool, quarantine: Quarantine | None) -> _Judged:
    states = matrix.states[pk]
    verdict, since = row_verdict(states, flaky)
    return _Judged(
        key=matrix.keys[pk],
        params=matrix.params[pk],
        states=states,
        verdict=verdict,
        since=since,
        flaky=flaky,
        quarantined=quarantine.reason if quarantine is not None else None,
    )


def _row(repository: str, columns: list[GridColumn], r: _Judged) -> GridRow:
    since = None if r.since is None else columns[r.since]
    return GridRow(
        config=r.key,
        params=r.params,
        cells=r.states,
        verdict=r.verdict,
        broken_since=since.commit if since else None,
        broken_since_url=since.page_url if since else None,
        broken_before_window=r.since is not None and not any(r.states[r.since + 1 :]),
        flaky=r.flaky,
        quarantined=r.quarantined,
        page_url=urls.config(repository, r.key),
    )


def row_verdict(states: Sequence[GridState], flaky: bool) -> tuple[GridVerdict, int | None]:
    """A row's verdict from its cells (newest first, "" where it did not run) and its flaky
    label; for `broken`, the column where its failing streak began."""
    ran = [(i, s) for i, s in enumerate(states) if s]
    head = ran[0][1]
    previous = ran[1][1] if len(ran) > 1 else None
    if head == "skip":
        return "skipped", None
    if head == "pass":
        return ("fixed" if previous in _FAILING else "passed"), None
    if flaky or head == "mixed":
        return "flaky", None
    if previous is None:
        return "no_baseline", None
    if previous not in _FAILING:
        return "new_failure", None
    streak = 1
    while streak < len(ran) and ran[streak][1] in _FAILING:
        streak += 1
    return "broken", ran[streak - 1][0]
