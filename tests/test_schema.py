"""The shared result records: validated on read, a torn last line tolerated, nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from cpci.schema import ResultRecord, config_id, read_results


def record(nodeid: str = "t.py::test[1]") -> ResultRecord:
    return ResultRecord(nodeid=nodeid, world_size=2, outcome="passed", duration_s=0.5)


def test_round_trip_and_config_id(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(record().to_json_line() + record("t.py::test[2]").to_json_line())
    records = read_results(str(path))
    assert records == [record(), record("t.py::test[2]")]
    assert records[0].config_id == config_id("t.py::test[1]", 2) == "t.py::test[1]@2"
    assert '"schema": "cpci.result/1"' in path.read_text()


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(record().to_json_line() + record().to_json_line()[:30])
    assert len(read_results(str(path))) == 1


def test_a_bad_line_in_the_middle_is_an_error_with_its_line_number(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(record().to_json_line() + "{}\n" + record().to_json_line())
    with pytest.raises(ValueError, match=r"r.jsonl:2: not a cpci.result/1 record"):
        read_results(str(path))


def test_unknown_outcomes_and_fields_are_rejected() -> None:
    with pytest.raises(ValidationError):
        ResultRecord(nodeid="t", world_size=2, outcome="sort-of", duration_s=1)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        ResultRecord.model_validate({"nodeid": "t", "world_size": 2, "outcome": "passed",
                                     "duration_s": 1, "surprise": 1})  # fmt: skip


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_metrics_and_durations_must_be_finite(bad: float) -> None:
    with pytest.raises(ValidationError):
        ResultRecord(nodeid="t", world_size=2, outcome="passed", duration_s=1, metrics={"e": bad})
    with pytest.raises(ValidationError):
        ResultRecord(nodeid="t", world_size=2, outcome="passed", duration_s=bad)
