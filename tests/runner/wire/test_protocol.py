"""What parent and ranks exchange: each record parses back to its type, and nothing else does."""

from __future__ import annotations

import pickle

import pytest
from pydantic import ValidationError

from cpci.runner.wire.protocol import (
    AgreedRecord,
    Begin,
    Close,
    End,
    Hello,
    Left,
    PlanEntry,
    RankPayload,
    Ready,
    WorldPlan,
    parse_agreed_record,
    parse_feed_message,
    parse_journal_event,
)
from cpci.runner.wire.rank_errors import rank_error

NEEDS_TORCH = False  # in process, no world (tests/runner/conftest.py)


def test_each_journal_event_parses_back_to_its_type() -> None:
    error = rank_error(1, "call", "E   assert 1 == 2")
    events = [
        Hello(pid=42, t=1.0),
        Ready(t=2.0, backend="gloo"),
        Begin(index=3, t=3.0),
        Left(index=3, t=3.5, errors=[error]),
        End(index=3, t=4.0, outcome="failed", errors=[error], failed_t=3.5),
    ]
    for event in events:
        parsed = parse_journal_event(event.model_dump_json().encode())
        assert type(parsed) is type(event)
        assert parsed == event


@pytest.mark.parametrize(
    "line",
    [
        b'{"ev": "begun", "index": 0, "t": 1.0}',  # no such event
        b'{"ev": "begin", "i": 0, "t": 1.0}',  # the plan index is spelt `index`
        b'{"ev": "end", "index": 0, "t": 1.0, "outcome": "crashed", "errors": []}',  # not local
    ],
)
def test_a_malformed_journal_line_is_refused(line: bytes) -> None:
    with pytest.raises(ValidationError):
        parse_journal_event(line)


def test_the_plan_round_trips_and_refuses_an_unknown_backend() -> None:
    plan = WorldPlan(
        backend="nccl",
        invocation_dir="/src",
        pytest_args=["-p", "no:cacheprovider"],
        pg_timeout_s=360.0,
        collect=["tests/test_x.py"],
    )
    assert WorldPlan.model_validate_json(plan.model_dump_json()) == plan
    with pytest.raises(ValidationError, match="backend"):
        WorldPlan.model_validate({**plan.model_dump(), "backend": "mpi"})


def test_feed_lines_parse_back_to_entries_and_the_close() -> None:
    entry = PlanEntry(index=4, nodeid="tests/test_x.py::test_a[4]")
    assert parse_feed_message(entry.model_dump_json().encode()) == entry
    assert isinstance(parse_feed_message(Close().model_dump_json().encode()), Close)
    for line in (b'{"kind": "config", "nodeid": "t.py::a"}', b'{"kind": "stop"}'):
        with pytest.raises(ValidationError):
            parse_feed_message(line)


def test_a_rank_payload_survives_the_pickling_of_gather_object() -> None:
    payload = RankPayload(
        rank=1,
        outcome="error",
        reports=[{"nodeid": "t.py::test_a", "when": "setup"}],
        errors=[rank_error(1, "setup", "fixture broke")],
        metrics={"max_abs_err": 0.5},
    )
    assert pickle.loads(pickle.dumps(payload)) == payload


def test_an_agreed_record_round_trips_through_its_line() -> None:
    record = AgreedRecord(
        index=2,
        outcome="passed",
        duration_s=0.25,
        rank_errors=[],
        reports=[{"when": "call"}],
        report_rank=0,
        metrics={"err": 1e-6},
    )
    assert parse_agreed_record(record.model_dump_json().encode()) == record
