"""The wire types: result records validated on read (a torn last line tolerated, nothing else),
one public surface for every part of cpci, and one first line of a message."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import ValidationError

import cpci.schema
from cpci.schema import (
    FIRST_LINE_MAX,
    OrderDependence,
    Outcome,
    PullRequestReport,
    ResultRecord,
    RunEnvelope,
    config_id,
    config_key,
    final_records,
    first_line,
    read_results,
)
from tests.builders import report, verdict


def record(nodeid: str = "t.py::test[1]") -> ResultRecord:
    return ResultRecord(nodeid=nodeid, world_size=2, outcome="passed", duration_s=0.5)


def test_round_trip_and_config_key(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(record().to_json_line() + record("t.py::test[2]").to_json_line())
    records = read_results(str(path))
    assert records == [record(), record("t.py::test[2]")]
    assert records[0].config_key == config_key("t.py::test[1]", 2) == "t.py::test[1]@2"
    assert '"schema": "cpci.result/1"' in path.read_text()


def test_config_id_still_answers_with_a_dated_deprecation_warning() -> None:
    """The former name of `config_key`, for scripts that read results files: it warns, saying
    since when, until when and what to call instead."""
    with pytest.warns(DeprecationWarning, match=r"since 2026-12-01 .* cpci 0\.3: use config_key"):
        assert config_id("t.py::test[1]", 2) == "t.py::test[1]@2"
    with pytest.warns(DeprecationWarning, match="use config_key"):
        assert record().config_id == "t.py::test[1]@2"


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
        ResultRecord.model_validate(
            {"nodeid": "t", "world_size": 2, "outcome": "passed", "duration_s": 1, "surprise": 1}
        )


@pytest.mark.parametrize("name", ["", "m" * 201, "loss\x00"])
def test_a_metric_name_is_bounded_and_holds_no_nul(name: str) -> None:
    # The service interns names in a text column: PostgreSQL's cannot hold NUL.
    with pytest.raises(ValidationError, match="metrics"):
        ResultRecord(nodeid="t", world_size=2, outcome="passed", duration_s=1, metrics={name: 1})


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_metrics_and_durations_must_be_finite(bad: float) -> None:
    with pytest.raises(ValidationError):
        ResultRecord(nodeid="t", world_size=2, outcome="passed", duration_s=1, metrics={"e": bad})
    with pytest.raises(ValidationError):
        ResultRecord(nodeid="t", world_size=2, outcome="passed", duration_s=bad)


def test_the_package_offers_exactly_what_it_names() -> None:
    """`from cpci.schema import X` is the one way in: every public name is in `__all__`."""
    public = {
        name
        for name, value in vars(cpci.schema).items()
        if not name.startswith("_") and not isinstance(value, ModuleType)
    }
    assert sorted(cpci.schema.__all__) == sorted(public)


def test_an_envelope_keeps_its_wire_shape() -> None:
    body = {"repository": "acme/attn", "commit": "a" * 40, "ci_run_id": "1", "results": []}
    envelope = RunEnvelope.model_validate(body)
    assert envelope.model_dump(by_alias=True)["schema"] == "cpci.run/1"
    assert RunEnvelope.model_json_schema()["$defs"].keys() >= {"ResultRecord", "Environment"}


def test_a_pull_request_report_survives_its_json() -> None:
    sent = report(new_failures=[verdict("p2p")], flaky=[verdict("a2a", "flaky")])
    assert PullRequestReport.model_validate_json(sent.model_dump_json()) == sent


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ""),
        ("  \n\t\n", ""),
        ("\n\n  AssertionError: 3e-2 > 1e-3  \nTraceback ...", "AssertionError: 3e-2 > 1e-3"),
        ("one line", "one line"),
    ],
)
def test_first_line_of_a_message(text: str, expected: str) -> None:
    assert first_line(text) == expected


def test_first_line_is_cut_to_its_limit_unless_told_not_to() -> None:
    long = "x" * (FIRST_LINE_MAX + 50) + "\nsecond"
    assert first_line(long) == "x" * FIRST_LINE_MAX
    assert first_line(long, limit=10) == "x" * 10
    assert first_line(long, limit=None) == "x" * (FIRST_LINE_MAX + 50)


def test_a_configs_final_record_is_its_last_attempt_whatever_the_file_order() -> None:
    def attempt(nodeid: str, n: int, outcome: Outcome) -> ResultRecord:
        return ResultRecord(nodeid=nodeid, world_size=2, outcome=outcome, duration_s=1, attempt=n)

    flaky_pass = attempt("t.py::a", 2, "passed").model_copy(update={"flaky": True})
    records = [attempt("t.py::a", 1, "failed"), attempt("t.py::b", 1, "passed"), flaky_pass]
    assert final_records(records) == [flaky_pass, records[1]]  # first-seen order, two configs
    assert final_records(reversed(records)) == [flaky_pass, records[1]]  # by attempt, not order
    other_size = records[1].model_copy(update={"world_size": 4})  # another config, same node id
    assert len(final_records([*records, other_size])) == 3


def test_a_non_finite_parameter_is_kept_as_its_text_in_strict_json() -> None:
    line = ResultRecord(
        nodeid="t", world_size=2, outcome="passed", duration_s=1, params={"eps": float("nan")}
    ).to_json_line()
    data = json.loads(line, parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))
    assert data["params"] == {"eps": "nan"}
    assert ResultRecord.model_validate(data).params == {"eps": "nan"}


def test_partial_metrics_are_absent_unless_set(tmp_path: Path) -> None:
    assert "metrics_partial" not in record().to_json_line()  # older readers see no new field
    partial = ResultRecord(
        nodeid="t", world_size=2, outcome="failed", duration_s=1, metrics_partial=[1]
    )
    path = tmp_path / "r.jsonl"
    path.write_text(partial.to_json_line())
    assert read_results(str(path))[0].metrics_partial == [1]


@pytest.mark.parametrize("run_id", [".", "..", "..."])
def test_a_run_id_of_dots_alone_is_refused_as_no_page_could_hold_it(run_id: str) -> None:
    with pytest.raises(ValidationError, match="is only dots: name the run"):
        RunEnvelope(repository="acme/attn", commit="a" * 40, ci_run_id=run_id, results=[])
    assert RunEnvelope(repository="acme/attn", commit="a" * 40, ci_run_id="1.", results=[])


def test_the_rerun_and_bisection_fields_are_absent_unless_set(tmp_path: Path) -> None:
    """Older readers (and the service's upload hash of an older record) see no new field."""
    line = record().to_json_line()
    for added in ("rerun_reason", "stop_reason", "arrival", "order_dependence"):
        assert added not in line
    found = OrderDependence(polluters=["t.py::test_cache"], replays=7, searched=64)
    rerun = ResultRecord(
        nodeid="t",
        world_size=2,
        outcome="failed",
        duration_s=1,
        attempt=2,
        rerun_reason="chance 45% >= 20%: rerun 1 of at most 2",
        stop_reason="decided after 2 attempt(s)",
        arrival=True,
        order_dependence=found,
    )
    path = tmp_path / "r.jsonl"
    path.write_text(rerun.to_json_line())
    assert read_results(str(path)) == [rerun]
    assert found.text() == "fails after t.py::test_cache; found in 7 replays among 64 predecessors"
    several = OrderDependence(polluters=["a", "b"], replays=9, searched=8)
    assert several.text().startswith("no single predecessor explains it; fails after a, b together")
    with pytest.raises(ValidationError, match="at least 1 item"):
        OrderDependence(polluters=[], replays=1, searched=1)
