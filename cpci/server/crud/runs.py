"""CI runs as readers see them: all attempts of one CI run merged, shard by shard.

"Re-run failed jobs" on GitHub makes a new attempt that uploads only the shards it reran, so a
shard's results come from the latest attempt that uploaded it, and the run is complete once every
shard index has been uploaded by some attempt on every matrix leg seen (a reusable workflow that
runs the suite on H100 and on A100 uploads shard 0 twice: once per leg, two shards).

A CI run id may name two runs, a branch run and a pull request's run that took the id first
(`crud.ingest`: the PR's upload cannot keep the branch's from landing); readers show the branch
run, so a PR credential can never put its results on a branch run's page.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, select

from cpci import urls
from cpci.evidence import culprit_error
from cpci.schema import OrderDependence, RunRef, ShardProgress
from cpci.server.analysis.shard_plans import plan_mismatches
from cpci.server.analysis.verdicts import ResultView
from cpci.server.core.errors import NotFound
from cpci.server.crud.common import chunks, fetch_rows, from_json, metric_names, one_of
from cpci.server.models import EnvironmentFingerprint, Repository, Run, Shard
from cpci.server.packed import ISOLATION_NAME, OUTCOME_CODE, OUTCOME_NAME, unpack_metrics
from cpci.urls import Links

#: A shard's place in its run: (matrix leg, shard index).
ShardKey = tuple[str, int]


@dataclass(frozen=True)
class MergedRun:
    runs: Sequence[Run]  # every attempt, oldest first
    shards: dict[ShardKey, Shard]  # (leg, index) -> the latest attempt's upload of it
    uploads: Sequence[Shard]  # every attempt's uploads: a failure then a passing rerun is flaky

    @property
    def latest(self) -> Run:
        return self.runs[-1]

    @property
    def legs(self) -> list[str]:
        """The matrix legs the workflow declared and any attempt uploaded for ('' alone for a
        run without a matrix)."""
        return sorted({s.leg for s in self.uploads} | set(self.latest.legs or ())) or [""]

    @property
    def progress(self) -> ShardProgress:
        total = self.latest.shard_total
        by_leg = {
            leg: [i for i in range(total) if (leg, i) not in self.shards] for leg in self.legs
        }
        missing_count = sum(len(m) for m in by_leg.values())
        return ShardProgress(
            reported=total * len(by_leg) - missing_count,
            expected=total * len(by_leg),
            missing=sorted({i for m in by_leg.values() for i in m}),
            legs=list(by_leg) if by_leg.keys() != {""} else [],
            missing_by_leg={leg: m for leg, m in by_leg.items() if m and leg},
            plan_mismatches=plan_mismatches(
                ((s.leg, s.shard_index, s.plan_sha256) for s in self.shards.values()), total
            ),
        )

    def ref(self, repository: str, links: Links) -> RunRef:
        run = self.latest
        return RunRef(
            ci_run_id=run.ci_run_id,
            ci_attempt=run.ci_attempt,
            commit=run.commit,
            branch=run.branch,
            pull_request=run.pull_request,
            url=links.run_page(repository, run.ci_run_id, run.ci_attempt),
            api_url=urls.api_run_summary(repository, run.ci_run_id),
            shards=self.progress,
        )


def merge_runs(*, session: Session, runs: Iterable[Run]) -> list[MergedRun]:
    """Group attempts by CI run id (newest run first) and pick each shard's latest upload; of a
    CI run id with a branch run, only the branch run's attempts."""
    by_ci: dict[str, list[Run]] = defaultdict(list)
    for run in sorted(runs, key=lambda r: (r.ci_run_id, r.ci_attempt)):
        by_ci[run.ci_run_id].append(run)
    for ci_run_id, group in by_ci.items():
        by_ci[ci_run_id] = [r for r in group if r.scope == "branch"] or group
    ids = [r.id for group in by_ci.values() for r in group]
    shards: dict[int | None, list[Shard]] = defaultdict(list)
    for chunk in chunks(ids):
        for shard in session.exec(select(Shard).where(col(Shard.run_id).in_(chunk))):
            shards[shard.run_id].append(shard)
    merged = []
    for group in by_ci.values():
        chosen: dict[ShardKey, Shard] = {}
        for run in group:  # oldest attempt first, so later attempts overwrite
            for shard in shards[run.id]:
                chosen[(shard.leg, shard.shard_index)] = shard
        merged.append(MergedRun(group, chosen, [s for run in group for s in shards[run.id]]))
    return sorted(merged, key=lambda m: -(m.latest.id or 0))


#: A result's `rank_errors` as a verdict reads them: messages, ranks, the culprit's error.
ErrorsRead = tuple[tuple[str, ...], tuple[int, ...], str]


def results_of(
    *, session: Session, shards: Iterable[Shard], failed_durations: bool = True
) -> dict[int, list[ResultView]]:
    """The results of the given shards, by config database id (narrow columns, one query: a
    report reads tens of thousands). With `failed_durations=False` only passing results keep
    their duration (what a PR report reads: it times passing results only), so the identical
    failures of a storm share one `ResultView`."""
    out: dict[int, list[ResultView]] = defaultdict(list)
    ids = [s.id for s in shards]
    if not ids:
        return out
    member, values = one_of(session, ids)
    duration = "r.duration_s" if failed_durations else _PASSED_DURATION
    rows = fetch_rows(
        session,
        f"SELECT r.config_id, r.outcome, {duration}, r.flaky, CAST(d.rank_errors AS TEXT), "
        "r.metrics, r.attempt, r.isolation, r.arrival, d.stop_reason, "
        "CAST(d.order_dependence AS TEXT) FROM result r "
        f"LEFT JOIN result_detail d ON d.result_id = r.id WHERE r.shard_id{member}",
        values,
    )
    names = metric_names(session, (row[5] for row in rows))
    # A storm repeats a few error texts over tens of thousands of results: each decoded once,
    # and (durations aside) each distinct result without metrics is one shared, immutable view.
    read: dict[str, ErrorsRead] = {}
    seen: dict[tuple[Any, ...], ResultView] = {}
    nothing: ErrorsRead = ((), (), "")
    for row in rows:
        config_pk, outcome, took, flaky, errors, metrics, attempt, isolation, *rest = row
        arrival, stop_reason, order = rest
        if not metrics and (shared := seen.get(row[1:])) is not None:
            out[config_pk].append(shared)
            continue
        if errors is None:
            messages, ranks, culprit = nothing
        elif (known := read.get(errors)) is not None:
            messages, ranks, culprit = known
        else:
            decoded = from_json(errors)
            known = (_messages(decoded), _ranks(decoded), culprit_error(decoded))
            messages, ranks, culprit = read[errors] = known
        view = ResultView(
            OUTCOME_NAME[outcome],
            took,
            bool(flaky),
            messages,
            unpack_metrics(metrics, names),
            ranks,
            attempt,
            ISOLATION_NAME[isolation],
            culprit,
            bool(arrival),
            stop_reason,
            _order_dependence(order),
        )
        if not metrics:
            seen[row[1:]] = view
        out[config_pk].append(view)
    return out


def _order_dependence(text: str | None) -> OrderDependence | None:
    """A result's stored bisection (SQL NULL, or JSON null where an ORM wrote it: none)."""
    found = from_json(text) if text else None
    return OrderDependence.model_validate(found) if found else None


#: A failing result's duration, dropped where only passing ones are timed.
_PASSED_DURATION = f"CASE WHEN r.outcome = {OUTCOME_CODE['passed']} THEN r.duration_s ELSE 0.0 END"


def _messages(errors: list[dict[str, Any]] | None) -> tuple[str, ...]:
    if not errors:
        return ()
    return tuple(
        text for e in errors for text in (e.get("message", ""), e.get("detail", "")) if text
    )


def _ranks(errors: list[dict[str, Any]] | None) -> tuple[int, ...]:
    return tuple(sorted({int(e["rank"]) for e in errors or () if int(e.get("rank", -1)) >= 0}))


def config_keys(*, session: Session, ids: Iterable[int]) -> dict[int, str]:
    wanted = list(ids)
    if not wanted:
        return {}
    member, values = one_of(session, wanted)
    return dict(fetch_rows(session, f"SELECT id, key FROM config WHERE id{member}", values))


def load_run(*, session: Session, repo: Repository, ci_run_id: str) -> MergedRun:
    """Every attempt of one CI run, merged; a 404 naming the run when none was uploaded."""
    runs = session.exec(
        select(Run).where(Run.repository_id == repo.id, Run.ci_run_id == ci_run_id)
    ).all()
    if not runs:
        raise NotFound(f"no run {ci_run_id!r} in {repo.name}: has any shard been uploaded?")
    return merge_runs(session=session, runs=runs)[0]


def environments_of(*, session: Session, merged: MergedRun) -> list[EnvironmentFingerprint]:
    """The stored environments the run's chosen shards ran on."""
    env_ids = {s.environment_id for s in merged.shards.values()}
    return list(
        session.exec(
            select(EnvironmentFingerprint).where(col(EnvironmentFingerprint.id).in_(env_ids))
        ).all()
    )
