"""The runner's plan file travels with the upload: its hash into the envelope, its shard as the
default; a `--shard` that contradicts it, or results files planned differently, are refused."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from sqlmodel import Session, select

from cpci.schema import ShardPlan, plan_path
from cpci.server.core.db import create_db_engine
from cpci.server.models import Shard
from cpci.upload.envelope import RunFields, build_envelope
from cpci.upload.errors import EnvelopeError
from cpci.upload.plan_file import plan_for
from tests.builders import REPO
from tests.upload.support import LiveService, results_file, run_cpci, upload_args

FIELDS = RunFields(repository=REPO, commit="a" * 40, ci_run_id="1")


def _plan(results: Path, index: int = 1, total: int = 3, digest: str = "a" * 64) -> ShardPlan:
    plan = ShardPlan(shard_index=index, shard_total=total, plan_hash=digest, configs=5)
    Path(plan_path(str(results))).write_text(plan.model_dump_json(by_alias=True))
    return plan


def test_the_plan_gives_the_hash_and_the_shard(tmp_path: Path) -> None:
    results = tmp_path / "r.jsonl"
    plan = plan_for([str(results)])
    assert plan is None  # no plan file: nothing to send, the shard from flags as before
    plan = _plan(results)
    assert plan_for([str(results)]) == plan
    envelope = build_envelope(FIELDS, [], {}, plan)
    assert (envelope.shard_index, envelope.shard_total, envelope.plan_hash) == (1, 3, "a" * 64)
    assert build_envelope(FIELDS, [], {"CPCI_SHARD": "1/3"}, plan).plan_hash == "a" * 64
    with pytest.raises(EnvelopeError, match=r"says 0/3 but the runner planned shard 1/3"):
        build_envelope(FIELDS, [], {"CPCI_SHARD": "0/3"}, plan)


def test_results_files_planned_differently_are_refused(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _plan(first)
    _plan(second, digest="b" * 64)
    with pytest.raises(EnvelopeError, match="planned differently"):
        plan_for([str(first), str(second)])
    Path(plan_path(str(second))).write_text("{}")
    with pytest.raises(EnvelopeError, match=r"is not a cpci\.plan/1 file"):
        plan_for([str(second)])


def test_cpci_upload_sends_the_plan_hash_the_service_stores(
    service: LiveService, tmp_path: Path
) -> None:
    results = results_file(tmp_path / "r.jsonl", [])
    _plan(results, index=2, total=4, digest="c" * 64)
    branch = ("--commit", "e" * 40, "--branch", "main", "--ci-run-id", "planned-1")
    done = run_cpci(tmp_path, *upload_args(service, tmp_path, results, *branch))
    assert done.returncode == 0, done.stderr
    shards = httpx.get(f"{service.url}/api/v1/repos/{REPO}/runs/planned-1").json()["run"]
    assert shards["shards"]["missing"] == [0, 1, 3]  # shard 2/4, from the plan
    engine = create_db_engine(service.database_url)
    try:
        with Session(engine) as session:
            stored = session.exec(select(Shard.plan_sha256).where(Shard.shard_index == 2)).all()
    finally:
        engine.dispose()
    assert "c" * 64 in stored
