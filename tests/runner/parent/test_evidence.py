"""The run's evidence: read once (a file or the service over real HTTP), kept with the run, and
the fallback to fixed reruns when the service does not answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpci import urls
from cpci.evidence import EvidencePolicy
from cpci.runner.options import ServiceSource
from cpci.runner.parent.evidence import RunEvidence
from cpci.schema import ConfigEvidence, EvidenceSummary, FlakeRecord
from tests.live_server import Request, serve_answers

NEEDS_TORCH = False  # in process, no world (tests/runner/conftest.py)

REPO = "acme/dist"
KNOWN = "t.py::test_known@2"


def _summary() -> EvidenceSummary:
    entry = ConfigEvidence(record=FlakeRecord(failures=1, trials=40), runs=20)
    return EvidenceSummary(
        repository=REPO,
        branch="main",
        runs=20,
        newest_commit="a" * 40,
        threshold=0.1,
        level=0.9,
        configs={KNOWN: entry},
    )


def test_a_fetched_summary_is_kept_with_the_run_and_decides_with_the_services_numbers(
    tmp_path: Path,
) -> None:
    asked: list[Request] = []

    def answer(request: Request) -> tuple[int, bytes]:
        asked.append(request)
        return 200, _summary().model_dump_json(by_alias=True).encode()

    kept = tmp_path / "out" / "r.jsonl.evidence.json"
    with serve_answers(answer) as base:
        url = base + urls.api_evidence(REPO, "main")
        evidence = RunEvidence.load(ServiceSource(url), kept)
    assert [r.path for r in asked] == [urls.api_evidence(REPO, "main")]  # one request
    assert EvidenceSummary.model_validate_json(kept.read_text()) == _summary()
    assert evidence.warning == ""
    assert evidence.rule("adaptive", 3).evidence == EvidencePolicy(0.1, 0.9)
    assert evidence.entry(KNOWN) is not None
    assert evidence.entry("t.py::test_new@2") is None
    assert "1 config(s) from 20 run(s) of main" in evidence.describe()
    # Read back from the kept file, the run decides the same.
    again = RunEvidence.load(ServiceSource(str(kept)), None)
    assert again.summary == evidence.summary


@pytest.mark.parametrize(
    ("status", "body", "why"),
    [
        (503, b"down", "answered 503"),
        (200, b'{"schema": "cpci.durations/1"}', "did not answer a cpci.evidence/1 document"),
    ],
)
def test_a_service_that_does_not_answer_means_fixed_reruns_said_in_the_summary(
    tmp_path: Path, status: int, body: bytes, why: str
) -> None:
    kept = tmp_path / "r.jsonl.evidence.json"
    with serve_answers(lambda request: (status, body)) as base:
        evidence = RunEvidence.load(ServiceSource(base + urls.api_evidence(REPO, "main")), kept)
    assert evidence.summary is None
    assert why in evidence.warning
    assert "every failure is rerun (fixed reruns, at most 2)" in evidence.describe()
    assert evidence.rule("adaptive", 2).mode == "fixed"
    # adaptive's higher cap is not paid by every failure: fixed keeps its own
    assert (evidence.rule("adaptive", 5).cap, evidence.rule("fixed", 5).cap) == (2, 5)
    assert not kept.exists()


def test_without_evidence_the_policy_asked_for_stands(tmp_path: Path) -> None:
    evidence = RunEvidence.load(None, tmp_path / "kept.json")
    assert evidence.rule("adaptive", 2).mode == "adaptive"  # every config: no history
    assert evidence.describe() == ""


def test_a_file_that_is_not_a_summary_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "e.json"
    bad.write_text("{}")
    with pytest.raises(pytest.UsageError, match=r"not a cpci\.evidence/1 file"):
        RunEvidence.load(ServiceSource(str(bad)), None)
    with pytest.raises(pytest.UsageError, match="cannot read it"):
        RunEvidence.load(None, None, tmp_path / "missing.txt")


def test_new_configs_and_changed_files_get_their_arrival_runs(tmp_path: Path) -> None:
    file = tmp_path / "e.json"
    file.write_text(_summary().model_dump_json(by_alias=True))
    changed = tmp_path / "changed.txt"
    changed.write_text("./t.py\n\nother.py\n")
    evidence = RunEvidence.load(ServiceSource(str(file)), None, changed)
    assert evidence.arrival_runs("u.py::test_new@2", "u.py", 2) == 2  # new to main
    assert evidence.arrival_runs(KNOWN, "t.py", 2) == 2  # its file changed
    unchanged = RunEvidence.load(ServiceSource(str(file)), None)
    assert unchanged.arrival_runs(KNOWN, "t.py", 2) == 0
    # Without a summary nothing is known to be new but what the PR changed.
    blind = RunEvidence.load(None, None, changed)
    assert blind.arrival_runs("u.py::test_new@2", "u.py", 2) == 0
    assert blind.arrival_runs(KNOWN, "t.py", 2) == 2
