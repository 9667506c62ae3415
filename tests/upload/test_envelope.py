"""The run envelope: fields from flags over the CI's variables, errors that name both, and the
matrix leg (a name, or runner labels stored sorted) with the legs the matrix declares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from cpci.cli import main
from cpci.upload.envelope import RunFields, build_envelope, leg_name
from cpci.upload.errors import EnvelopeError
from tests.upload.support import REPO, LiveService, results_file, upload_args


def test_envelope_errors_name_the_flag_and_variable() -> None:
    with pytest.raises(EnvelopeError, match=r"--commit is required \(or set GITHUB_SHA\)"):
        build_envelope(RunFields(repository=REPO, ci_run_id="1"), [], {})
    with pytest.raises(EnvelopeError, match="INDEX/TOTAL"):
        build_envelope(RunFields(shard="2/2"), [], {})


def upload_empty_shard(service: LiveService, tmp_path: Path, run: str, *extra: str) -> None:
    """`cpci upload` of an empty shard of `run` on main (the leg from flags or variables)."""
    results = results_file(tmp_path / "r.jsonl", [])
    branch = ("--commit", "e" * 40, "--branch", "main", "--ci-run-id", run)
    assert main(upload_args(service, tmp_path, results, *branch, *extra)) == 0


def shards_of(service: LiveService, run: str) -> dict[str, Any]:
    response = httpx.get(f"{service.url}/api/v1/repos/{REPO}/runs/{run}")
    shards: dict[str, Any] = response.json()["run"]["shards"]
    return shards


def test_a_leg_given_as_runner_labels_is_sorted(
    service: LiveService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CPCI_LEG", '["self-hosted", "h100", "linux"]')
    upload_empty_shard(service, tmp_path, "leg-1")
    upload_empty_shard(service, tmp_path, "leg-1", "--leg", "a100")  # the flag beats CPCI_LEG
    shards = shards_of(service, "leg-1")
    assert shards["legs"] == ["a100", "h100,linux,self-hosted"]
    assert shards["text"] == "2/2 shards on 2 legs"


def test_a_malformed_label_list_names_the_flag() -> None:
    with pytest.raises(EnvelopeError, match="--leg"):
        leg_name('["h100", 3]')


def test_declared_legs_come_from_the_workflows_runner_label_sets(
    service: LiveService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CPCI_LEGS", '[["self-hosted", "h100"], ["self-hosted", "a100"]]')
    monkeypatch.setenv("CPCI_LEG", '["self-hosted", "h100"]')
    upload_empty_shard(service, tmp_path, "legs-1")
    shards = shards_of(service, "legs-1")
    assert shards["missing_by_leg"] == {"a100,self-hosted": [0]}
    assert shards["text"] == "1/2 shards on 2 legs"
