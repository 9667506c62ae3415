"""Compaction on both engines: a config's flake record, its history's counts and its durations
read the same before and after its old runs are rolled up (durations within the sketch's
error), a second compaction changes nothing, and one stopped between batches then resumed
loses and double-counts nothing."""

from __future__ import annotations

import math
import random
import threading
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, text
from sqlmodel import Session, select

from cpci.server.analysis.flakiness import FlakinessPolicy, assess_flakiness, flake_record
from cpci.server.analysis.observations import Observation
from cpci.server.crud import compact as compact_module
from cpci.server.crud.compact import CompactProgress, compact
from cpci.server.crud.durations import branch_durations
from cpci.server.crud.evidence import branch_evidence
from cpci.server.crud.history import observations
from cpci.server.models import Config, Result, ResultDetail, utcnow
from cpci.server.rollup import RELATIVE_ERROR, DurationSketch, ResultRollup
from cpci.urls import Links
from tests.builders import REPO, config, envelope, record, replaced, sha, upload
from tests.server.databases import ClientFactory

OLD_RUNS, NEW_RUNS = 9, 3
NAMES = ("steady", "flaky", "broken")
LINKS = Links("http://cpci.test")
WINDOW = 200


def _results(rng: random.Random, run: int) -> list[Any]:
    """Each config's attempts in one run: `flaky` fails a third of its runs and passes on a
    rerun half of those times; `broken` fails runs 3-5 with one of two errors."""
    out = [record("steady", duration_s=rng.uniform(1.0, 3.0))]
    if rng.random() < 1 / 3:
        out.append(record("flaky", "failed", message="RuntimeError: NCCL timeout", attempt=1))
        if rng.random() < 0.5:
            out.append(record("flaky", attempt=2, flaky=True, duration_s=rng.uniform(4, 6)))
    else:
        out.append(record("flaky", duration_s=rng.uniform(4.0, 6.0)))
    if 3 <= run <= 5:
        message = "AssertionError: max diff 0.3" if run % 2 else "AssertionError: shape"
        out.append(record("broken", "failed", message=message))
    else:
        out.append(record("broken", "skipped" if run == 7 else "passed", duration_s=0.5))
    return out


@pytest.fixture
def seeded(client: TestClient, engine: Engine) -> int:
    """OLD_RUNS runs of main, one a day 30 to 22 days ago, then NEW_RUNS of today; REPO's id."""
    rng = random.Random(23)
    for run in range(OLD_RUNS + NEW_RUNS):
        upload(
            client,
            envelope(_results(rng, run), ci_run_id=str(1000 + run), commit=sha(run)),
        )
    with Session(engine) as session:
        for run in range(OLD_RUNS):
            session.execute(
                text("UPDATE run SET created_at = :at WHERE ci_run_id = :ci"),
                {"at": utcnow() - timedelta(days=30 - run), "ci": str(1000 + run)},
            )
        session.commit()
        repo = session.execute(text("SELECT id FROM repository")).scalar_one()
    return int(repo)


def _reads(engine: Engine, repo_id: int) -> dict[str, Any]:
    """What the readers make of REPO's main: each config's flake record and counts, the
    evidence, the durations."""
    with Session(engine) as session:
        pks = {c.nodeid.split("[")[-1][:-1]: c.id for c in session.exec(select(Config))}
        seen = observations(
            session=session,
            repo_name=REPO,
            config_pks=sorted(pk for pk in pks.values() if pk is not None),
            window=WINDOW,
            links=LINKS,
            branch="main",
        )
        evidence = branch_evidence(
            session=session,
            repo_id=repo_id,
            repo_name=REPO,
            branch="main",
            window=WINDOW,
            policy=FlakinessPolicy(),
            links=LINKS,
        )
        durations = branch_durations(
            session=session, repo_id=repo_id, branch="main", runs=OLD_RUNS + NEW_RUNS
        )
    out: dict[str, Any] = {"durations": durations.durations}
    for name, pk in pks.items():
        assessed = assess_flakiness(seen.get(pk or 0, []), FlakinessPolicy())
        out[name] = (assessed.record, assessed.runs, assessed.passes, assessed.failures)
    out["evidence"] = {k: (v.record, v.flaky) for k, v in evidence.configs.items()}
    return out


def _stored(engine: Engine) -> tuple[int, int, list[dict[str, Any]]]:
    with Session(engine) as session:
        results = session.exec(select(func.count()).select_from(Result)).one()
        details = session.exec(select(func.count()).select_from(ResultDetail)).one()
        rollups = [
            r.model_dump()
            for r in session.exec(select(ResultRollup).order_by(ResultRollup.id))  # type: ignore[arg-type]
        ]
    return results, details, rollups


def _same_reads(before: dict[str, Any], after: dict[str, Any]) -> None:
    for name in NAMES:
        assert after[name] == before[name], name  # record, runs, passes, failures: exact
    assert after["evidence"] == before["evidence"]
    assert after["durations"].keys() == before["durations"].keys()
    for nodeid, seconds in before["durations"].items():
        assert after["durations"][nodeid] == pytest.approx(seconds, rel=RELATIVE_ERROR)


def test_compaction_keeps_what_the_readers_read(engine: Engine, seeded: int) -> None:
    before = _reads(engine, seeded)
    raw, _, _ = _stored(engine)
    cut = utcnow() - timedelta(days=7)

    done = compact(engine=engine, before=cut)

    results, details, rollups = _stored(engine)
    assert done.runs == OLD_RUNS
    assert done.results == raw - results > 0
    assert sum(r["results"] for r in rollups) == done.results  # every rolled-up result counted once
    assert details < done.results  # the old failures' details went with them
    _same_reads(before, _reads(engine, seeded))
    assert before["flaky"][0].failures > 0
    assert before["broken"][0].signatures


def test_a_second_compaction_changes_nothing(engine: Engine, seeded: int) -> None:
    cut = utcnow() - timedelta(days=7)
    compact(engine=engine, before=cut)
    once = _stored(engine)
    again = compact(engine=engine, before=cut)
    assert again == CompactProgress(elapsed_s=again.elapsed_s)
    assert _stored(engine) == once


def test_a_dry_run_counts_and_changes_nothing(engine: Engine, seeded: int) -> None:
    stored = _stored(engine)
    dry = compact(engine=engine, before=utcnow() - timedelta(days=7), dry_run=True)
    assert (dry.runs, dry.rollups) == (OLD_RUNS, 0)
    assert dry.results > 0
    assert _stored(engine) == stored


class _Stop(Exception):
    pass


def test_a_compaction_stopped_between_batches_then_resumed_loses_and_doubles_nothing(
    engine: Engine, seeded: int
) -> None:
    before = _reads(engine, seeded)
    raw, _, _ = _stored(engine)
    cut = utcnow() - timedelta(days=7)
    batches: list[CompactProgress] = []

    def stop_after_three(progress: CompactProgress) -> None:
        batches.append(progress)
        if progress.batches == 3:
            raise _Stop  # the process killed after its third commit

    with pytest.raises(_Stop):
        compact(engine=engine, before=cut, batch_results=1, on_batch=stop_after_three)
    assert [b.runs for b in batches] == [1, 2, 3]  # one run a batch: a run is never split
    halfway, _, rollups = _stored(engine)
    assert raw - halfway == batches[-1].results == sum(r["results"] for r in rollups)

    rest = compact(engine=engine, before=cut, batch_results=1)

    assert rest.runs == OLD_RUNS - 3
    results, _, rollups = _stored(engine)
    assert raw - results == batches[-1].results + rest.results == sum(r["results"] for r in rollups)
    _same_reads(before, _reads(engine, seeded))


def test_a_run_uploaded_late_to_a_compacted_day_merges_into_its_rows(
    client: TestClient, engine: Engine, seeded: int
) -> None:
    cut = utcnow() - timedelta(days=7)
    compact(engine=engine, before=cut)
    _, _, first = _stored(engine)
    upload(client, envelope([record("steady", duration_s=2.0)], ci_run_id="999", commit=sha(99)))
    with Session(engine) as session:
        session.execute(
            text("UPDATE run SET created_at = :at WHERE ci_run_id = '999'"),
            {"at": utcnow() - timedelta(days=30)},  # the first old run's day
        )
        session.commit()
    compact(engine=engine, before=cut)
    _, _, second = _stored(engine)
    assert len(second) == len(first)  # no second row for the day
    grown = [(a, b) for a, b in zip(first, second, strict=True) if a != b]
    assert len(grown) == 1
    (old, new) = grown[0]
    for figure in ("results", "runs", "trials"):
        assert new[figure] == old[figure] + 1, figure


def test_the_sketch_keeps_quantiles_within_its_error() -> None:
    rng = random.Random(5)
    seconds = sorted(rng.lognormvariate(0, 2) for _ in range(5001))
    sketch = DurationSketch.of(seconds[:2000]).merge(DurationSketch.of(seconds[2000:]))
    assert sketch.count == len(seconds)
    for q in (0.5, 0.9, 0.99):
        true = seconds[math.ceil(q * len(seconds)) - 1]  # the nearest rank
        assert sketch.quantile(q) == pytest.approx(true, rel=RELATIVE_ERROR)
    assert DurationSketch(sketch.stored()).median() == pytest.approx(
        seconds[2500], rel=RELATIVE_ERROR
    )


def test_the_service_compacts_in_the_background_where_retention_is_set(
    make_client: ClientFactory, engine: Engine, seeded: int
) -> None:
    before = _reads(engine, seeded)
    raw, _, _ = _stored(engine)
    with make_client() as plain:
        assert not hasattr(plain.app.state, "compaction")  # off: every raw result is kept
    with make_client(raw_retention_days=7, compact_interval_s=3600) as service:
        job = service.app.state.compaction
        assert job.wait_for_pass(1)
        assert job.last is not None
        assert job.last.runs == OLD_RUNS
    results, _, rollups = _stored(engine)
    assert raw - results == job.last.results == sum(r["results"] for r in rollups)
    _same_reads(before, _reads(engine, seeded))


def test_the_config_and_history_pages_say_before_which_day_they_are_daily_aggregates(
    client: TestClient, engine: Engine, seeded: int
) -> None:
    key = config("broken")
    twin = f"/api/v1/repos/{REPO}/config"
    assert client.get(twin, params={"config": key}).json()["aggregates"] is None
    assert 'id="aggregates"' not in client.get(f"/ui/{REPO}/config", params={"config": key}).text

    compact(engine=engine, before=utcnow() - timedelta(days=7))

    newest_old_day = (utcnow() - timedelta(days=30 - (OLD_RUNS - 1))).date()
    raw_from = (newest_old_day + timedelta(days=1)).isoformat()
    aggregates = client.get(twin, params={"config": key}).json()["aggregates"]
    rolled = {"raw_from": raw_from, "days": OLD_RUNS, "results": OLD_RUNS, "failures": 3}
    assert aggregates == rolled  # broken failed runs 3 to 5
    page = client.get(f"/ui/{REPO}/config", params={"config": key}).text
    assert f"Before {raw_from}: daily aggregates ({OLD_RUNS} results over {OLD_RUNS} day(s)" in page
    history = f"/api/v1/repos/{REPO}/history"
    assert client.get(history, params={"config": key}).json()["aggregates"] == rolled
    first = client.get(history, params={"config": key, "limit": 1}).json()
    assert first["next_cursor"] is not None
    assert first["aggregates"] is None  # said on the last page, where the raw results end


def test_two_compactions_at_once_roll_each_run_up_once(engine: Engine, seeded: int) -> None:
    before = _reads(engine, seeded)
    raw, _, _ = _stored(engine)
    cut = utcnow() - timedelta(days=7)
    start = threading.Barrier(2)
    done: list[CompactProgress] = []

    def replica() -> None:
        start.wait()
        done.append(compact(engine=engine, before=cut, batch_results=1))

    threads = [threading.Thread(target=replica) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results, _, rollups = _stored(engine)
    assert sum(d.runs for d in done) == OLD_RUNS  # each run rolled up by one of them
    assert raw - results == sum(d.results for d in done) == sum(r["results"] for r in rollups)
    _same_reads(before, _reads(engine, seeded))


def test_a_pull_requests_rolled_up_runs_count_for_its_own_history_only(
    client: TestClient, engine: Engine, seeded: int
) -> None:
    failing = [record("steady", "failed", message="RuntimeError: mine")]
    for n in range(2):
        pr = envelope(failing, ci_run_id=str(50 + n), commit=sha(50 + n))
        upload(client, replaced(pr, pull_request=7, branch="pr-7", base_commit=sha(0)))
    with Session(engine) as session:
        session.execute(
            text("UPDATE run SET created_at = :at WHERE pull_request = 7"),
            {"at": utcnow() - timedelta(days=20)},
        )
        session.commit()
        steady = session.exec(select(Config.id).where(Config.nodeid.endswith("[steady]"))).one()

    def read(pull_request: int | None) -> list[Observation]:
        with Session(engine) as session:
            seen = observations(
                session=session,
                repo_name=REPO,
                config_pks=[steady],
                window=WINDOW,
                links=LINKS,
                branch="main",
                pull_request=pull_request,
            )
        return seen[steady]

    before = (read(None), read(7))
    compact(engine=engine, before=utcnow() - timedelta(days=7))
    branch, own = read(None), read(7)
    assert not any(o.on_pull_request for o in branch)
    assert [o.signature for o in own if o.on_pull_request] == ["RuntimeError: mine"] * 2
    for old, new in zip(before, (branch, own), strict=True):
        assert flake_record([o for o in new if o.counted]) == flake_record(
            [o for o in old if o.counted]
        )
        assert sorted(o.outcome for o in new) == sorted(o.outcome for o in old)


def test_a_batch_fills_over_several_run_queries(
    engine: Engine, seeded: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compact_module, "RUNS_PER_QUERY", 2)
    done = compact(engine=engine, before=utcnow() - timedelta(days=7))
    assert (done.batches, done.runs) == (1, OLD_RUNS)
