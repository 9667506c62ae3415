"""A result's packed columns read back exactly as they were given."""

from __future__ import annotations

import struct

import pytest

from cpci.schema import OUTCOMES
from cpci.server.packed import (
    OUTCOME_CODE,
    metric_ids,
    outcome_codes,
    pack_batch,
    pack_metrics,
    unpack_batch,
    unpack_metrics,
)


@pytest.mark.parametrize("top", [7, 0xFFFF, 0x10000])
def test_metrics_round_trip_exactly_whatever_their_name_ids(top: int) -> None:
    """Values stay float64 to the bit; ids past 65,535 take the four-byte layout."""
    ids = {"loss": 1, "tflops": top}
    metrics = {"loss": 0.1 + 0.2, "tflops": -3.0e-310}
    packed = pack_metrics(metrics, ids)
    assert packed[0] == (2 if top <= 0xFFFF else 4)
    assert len(packed) == 1 + 2 * (packed[0] + 8)
    assert metric_ids(packed) == {1, top}
    back = unpack_metrics(packed, {v: k for k, v in ids.items()})
    assert back == metrics
    assert [struct.pack("<d", v) for v in back.values()] == [
        struct.pack("<d", v) for v in metrics.values()
    ]


def test_no_metrics_and_no_batch_are_empty_bytes() -> None:
    assert pack_metrics({}, {}) == b""
    assert unpack_metrics(b"", {}) == {}
    assert metric_ids(None) == set()
    assert pack_batch(None) == b""
    assert unpack_batch(b"") is None


@pytest.mark.parametrize("start", [None, 0.0, 2.75])
def test_a_batch_round_trips_with_or_without_its_start_up(start: float | None) -> None:
    batch = {"index": 2**31 - 1, "world": 0, "size": 16, "start_s": start}
    assert unpack_batch(pack_batch(batch)) == batch


def test_outcome_codes_sort_as_the_names_do() -> None:
    """The run page sorts by the stored code: the order must be the names' order."""
    assert sorted(OUTCOMES, key=OUTCOME_CODE.__getitem__) == sorted(OUTCOMES)
    assert outcome_codes({"passed", "failed"}) == (
        f"({OUTCOME_CODE['failed']}, {OUTCOME_CODE['passed']})"
    )
