"""One record, one config: what a test records is checked where it records it, and a record the
ranks or the parent cannot accept fails its own config, never the other configs of its world."""

from __future__ import annotations

import math

import pytest

from cpci.runner.rank.dist import DistContext, metric_problem
from cpci.schema import MAX_METRIC_NAME_LENGTH, NOT_RUN_OUTCOMES
from tests.runner.helpers import by_nodeid, results, worlds_started


def context() -> DistContext:
    return DistContext(rank=0, world_size=2, local_rank=0, backend="gloo", device="cpu")


def test_record_metric_keeps_the_max_of_what_it_is_given() -> None:
    dist = context()
    dist.record_metric("err", 2)
    dist.record_metric("err", 1.5)
    assert dist.metrics == {"err": 2.0}


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("m" * 201, 1.0, "metric name is 201 characters, the limit is 200"),
        ("", 1.0, "metric name is empty"),
        ("a\x00b", 1.0, "metric name holds a NUL character"),
        ("err", math.nan, "metric 'err' must be a finite number, got nan"),
        ("err", math.inf, "metric 'err' must be a finite number, got inf"),
        ("err", "close", "metric 'err' must be a number, got 'close'"),
    ],
)
def test_record_metric_refuses_what_the_results_cannot_hold(
    name: str, value: float, message: str
) -> None:
    dist = context()
    with pytest.raises(ValueError, match=message):
        dist.record_metric(name, value)
    assert dist.metrics == {}


def test_the_limit_is_the_schemas() -> None:
    assert metric_problem("m" * MAX_METRIC_NAME_LENGTH, 1.0) is None
    assert metric_problem("m" * (MAX_METRIC_NAME_LENGTH + 1), 1.0) is not None
    assert metric_problem(7, 1.0) == "metric name must be a string, got int 7"
    assert metric_problem("err", True) == "metric 'err' must be a number, got bool True"


SUITE = """
import json

import pytest
import torch
import torch.distributed as dist

from cpci.runner.wire.protocol import AgreedRecord, RankPayload

LONG = "m" * 201


def send_once_with_a_long_metric(cls):
    # What a rank of an older cpci (or a hostile test) would send: a line past the schema's bound.
    original = cls.model_dump_json

    def dump(self, **kwargs):
        cls.model_dump_json = original
        data = json.loads(original(self, **kwargs))
        data["metrics"][LONG] = 1.0
        return json.dumps(data)

    cls.model_dump_json = dump


@pytest.mark.cpci(world_size=2)
def test_a_passes(cpci_dist):
    cpci_dist.record_metric("err", 0.5)


@pytest.mark.cpci(world_size=2)
def test_b_long_metric_name(cpci_dist):
    cpci_dist.record_metric(LONG, 1.0)


@pytest.mark.cpci(world_size=2)
def test_c_real_failure(cpci_dist):
    assert cpci_dist.rank == 1, "a real regression"


@pytest.mark.cpci(world_size=2)
def test_d_long_name_written_directly(cpci_dist):
    cpci_dist.metrics[LONG] = 1.0
    cpci_dist.metrics["kept"] = float("nan")


@pytest.mark.cpci(world_size=2)
def test_e_payload_past_a_bound(cpci_dist):
    if cpci_dist.rank == 1:
        send_once_with_a_long_metric(RankPayload)


@pytest.mark.cpci(world_size=2)
def test_f_record_past_a_bound(cpci_dist):
    if cpci_dist.rank == 0:
        send_once_with_a_long_metric(AgreedRecord)


@pytest.mark.cpci(world_size=2)
def test_g_after(cpci_dist):
    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == 2
    cpci_dist.record_metric("err", 0.25)
"""


def test_one_bad_record_costs_its_own_config_and_nothing_else(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_records=SUITE)
    result = pytester.runpytest_subprocess("--cpci-results=r.jsonl", "-rA")
    records = by_nodeid(results(pytester.path / "r.jsonl"))
    outcomes = {n.split("::")[1]: r["outcome"] for n, r in records.items()}
    assert outcomes == {
        "test_a_passes": "passed",
        "test_b_long_metric_name": "failed",  # record_metric raised in the test body
        "test_c_real_failure": "failed",  # stays a failure, never not_run
        "test_d_long_name_written_directly": "error",  # the rank dropped it: a teardown error
        "test_e_payload_past_a_bound": "error",  # rank 0 refused rank 1's payload
        "test_f_record_past_a_bound": "error",  # the parent refused rank 0's line
        "test_g_after": "passed",
    }
    assert not NOT_RUN_OUTCOMES & set(outcomes.values())
    assert worlds_started(result.stdout.str()) == 1  # no config cost the world
    assert records["test_records.py::test_a_passes"]["metrics"] == {"err": 0.5}
    assert records["test_records.py::test_g_after"]["metrics"] == {"err": 0.25}

    def messages(test: str) -> list[str]:
        return [e["message"] for e in records[f"test_records.py::{test}"]["rank_errors"]]

    assert all(
        "metric name is 201 characters, the limit is 200" in m
        for m in messages("test_b_long_metric_name")
    )
    assert messages("test_c_real_failure") == ["AssertionError: a real regression"]
    direct = records["test_records.py::test_d_long_name_written_directly"]
    assert direct["metrics"] == {}
    details = " ".join(e["detail"] for e in direct["rank_errors"])
    assert "metric name is 201 characters, the limit is 200" in details
    assert "metric 'kept' must be a finite number, got nan" in details
    payload, *_ = messages("test_e_payload_past_a_bound")
    assert payload.startswith("cpci could not accept rank 1's report of this config: metrics.mmm")
    assert payload.endswith("(key): String should have at most 200 characters")
    (line,) = messages("test_f_record_past_a_bound")
    assert line.startswith("cpci could not accept the ranks' record of this config: metrics.mmm")
    # pytest shows each one as it was recorded, with the reason.
    result.stdout.fnmatch_lines(["ERROR test_records.py::test_f_record_past_a_bound*"])
    result.stdout.fnmatch_lines(["FAILED test_records.py::test_b_long_metric_name*"])
