"""A result's packed columns read back exactly as they were given."""

from __future__ import annotations

import math
import random
import struct
from collections.abc import Mapping

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
    (packed,) = pack_metrics([metrics], ids)
    assert packed[0] == (2 if top <= 0xFFFF else 4)
    assert len(packed) == 1 + 2 * (packed[0] + 8)
    assert metric_ids(packed) == {1, top}
    back = unpack_metrics(packed, {v: k for k, v in ids.items()})
    assert back == metrics
    assert [struct.pack("<d", v) for v in back.values()] == [
        struct.pack("<d", v) for v in metrics.values()
    ]


def _packed_one_by_one(metrics: Mapping[str, float], name_ids: Mapping[str, int]) -> bytes:
    """The layout as the service first wrote it, result by result (stored rows hold it)."""
    if not metrics:
        return b""
    ids = [name_ids[name] for name in metrics]
    width = 2 if max(ids) <= 0xFFFF else 4
    pair = struct.Struct("<Hd" if width == 2 else "<Id").pack
    return bytes([width]) + b"".join(pair(i, v) for i, v in zip(ids, metrics.values(), strict=True))


def test_metrics_packed_in_bulk_are_the_bytes_packed_one_by_one() -> None:
    """Results with names in other orders, other counts, ids either side of the two-byte limit
    and edge values, interleaved (each order's layout is reused): every value the same bytes."""
    name_ids = {"a": 0, "b": 1, "c": 0xFFFF, "d": 0x10000, "e": 2**32 - 1}
    name_ids |= {f"m{i}": 100 + i for i in range(40)}
    edges = [0.0, -0.0, 5e-324, -2.2e-308, 1.7976931348623157e308, math.inf, -math.inf, 3]
    rng = random.Random(23)
    names = list(name_ids)
    metrics: list[dict[str, float]] = [{}, {"a": math.nan}, {"b": 1.0, "a": 2.0}]
    metrics += [{"a": 2.0, "b": 1.0}, {"c": 0.5}, {"c": 0.5, "d": 0.25}, {"e": -1.0}]
    metrics.append({f"m{i}": edges[i % len(edges)] for i in range(40)})
    for _ in range(500):
        chosen = rng.sample(names, rng.choice([0, 1, 2, 2, 2, 3, 7]))
        metrics.append({n: rng.choice([*edges, rng.uniform(-1e9, 1e9)]) for n in chosen})
    packed = pack_metrics(metrics, name_ids)
    assert packed == [_packed_one_by_one(m, name_ids) for m in metrics]
    assert {p[0] for p in packed if p} == {2, 4}
    names_of = {v: k for k, v in name_ids.items()}
    for m, p in zip(metrics, packed, strict=True):
        assert list(unpack_metrics(p, names_of)) == list(m)


def test_no_metrics_and_no_batch_are_empty_bytes() -> None:
    assert pack_metrics([{}], {}) == [b""]
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
