"""A stored result's columns in few bytes: what is packed, and how it is read back.

A service keeps hundreds of millions of results, so a result row holds numbers only: its outcome
and isolation as small integer codes, its metrics as (interned name id, float64) pairs and its
batch as four numbers, in one byte string each. Values round-trip exactly (metrics stay float64).
The codes are stored data: a code, once given, never changes meaning; new outcomes take new codes.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from sqlalchemy import SmallInteger
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from cpci.schema import OUTCOMES

#: Outcome codes, in the alphabetical order of their names so that sorting by code sorts by name.
OUTCOME_CODE: dict[str, int] = {name: code for code, name in enumerate(sorted(OUTCOMES), 1)}
OUTCOME_NAME: dict[int, str] = {code: name for name, code in OUTCOME_CODE.items()}
#: Isolation codes; 0 is "not isolated" (a NULL would cost PostgreSQL a null bitmap per row).
ISOLATION_CODE: dict[str | None, int] = {
    None: 0,
    "fails-alone": 1,
    "order-dependent": 2,
    "flaky": 3,
}
ISOLATION_NAME: dict[int, str | None] = {code: name for name, code in ISOLATION_CODE.items()}

#: Metric pairs: a width byte (2 or 4: the name ids' bytes), then (name id, float64) pairs.
_PAIR_FORMAT = {2: "Hd", 4: "Id"}
_PAIR = {width: struct.Struct("<" + pair) for width, pair in _PAIR_FORMAT.items()}
#: A batch: group index, world, group size, world start-up seconds (NaN: not measured).
_BATCH = struct.Struct("<IIId")


def outcome_codes(outcomes: Any) -> str:
    """`IN (...)` SQL text of the codes of `outcomes`, for reads written as SQL text."""
    return "(" + ", ".join(str(OUTCOME_CODE[o]) for o in sorted(outcomes)) + ")"


def pack_metrics(
    metrics: Iterable[Mapping[str, float]], name_ids: Mapping[str, int]
) -> list[bytes]:
    """Each of `metrics` as stored: each name by its `name_ids` id (the metric_name table's).

    An upload's results mostly record the same names in the same order, so the layout of each
    order (width, ids, struct) is worked out once and a result costs one `pack` of its values:
    a third of packing result by result."""
    layouts: dict[tuple[str, ...], _Layout] = {}

    def pack(one: Mapping[str, float]) -> bytes:
        if not one:
            return b""
        names = tuple(one)
        layout = layouts.get(names)
        if layout is None:
            layout = layouts[names] = _layout(names, name_ids)
        pack_layout, fields = layout
        fields[2::2] = one.values()
        return pack_layout(*fields)

    return [pack(one) for one in metrics]


class _Layout(NamedTuple):
    """How results recording one sequence of metric names are packed: `fields` holds the width
    and each name's id, with a slot after each id for a result's value."""

    pack: Callable[..., bytes]
    fields: list[float]


def _layout(names: tuple[str, ...], name_ids: Mapping[str, int]) -> _Layout:
    ids = [name_ids[name] for name in names]
    width = 2 if max(ids) <= 0xFFFF else 4
    fields: list[float] = [width]
    for name_id in ids:
        fields += [name_id, math.nan]
    return _Layout(struct.Struct("<B" + _PAIR_FORMAT[width] * len(ids)).pack, fields)


def unpack_metrics(packed: bytes | memoryview | None, names: Mapping[int, str]) -> dict[str, float]:
    """A stored metrics value back as the upload gave it; `names` maps name ids to names."""
    if not packed:
        return {}
    raw = bytes(packed)
    return {names[i]: value for i, value in _PAIR[raw[0]].iter_unpack(raw[1:])}


def metric_ids(packed: bytes | memoryview | None) -> set[int]:
    """The name ids a stored metrics value refers to (to look up only those names)."""
    if not packed:
        return set()
    raw = bytes(packed)
    return {i for i, _ in _PAIR[raw[0]].iter_unpack(raw[1:])}


def pack_batch(batch: Mapping[str, Any] | None) -> bytes:
    """A result's batch (`cpci.schema.BatchInfo` as a dict) as stored; b"" without one."""
    if not batch:
        return b""
    start = batch.get("start_s")
    return _BATCH.pack(
        batch["index"], batch["world"], batch["size"], math.nan if start is None else start
    )


def unpack_batch(packed: bytes | memoryview | None) -> dict[str, Any] | None:
    """A stored batch back as the dict the upload's `BatchInfo` dumps to; None without one."""
    if not packed:
        return None
    index, world, size, start = _BATCH.unpack(bytes(packed))
    return {
        "index": index,
        "world": world,
        "size": size,
        "start_s": None if math.isnan(start) else start,
    }


class OutcomeCode(TypeDecorator[str]):
    """An outcome name in Python, its small integer code in the database."""

    impl = SmallInteger
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> int | None:
        return None if value is None else OUTCOME_CODE[value]

    def process_result_value(self, value: int | None, dialect: Dialect) -> str | None:
        return None if value is None else OUTCOME_NAME[value]


class IsolationCode(TypeDecorator[str]):
    """What isolation found (or None) in Python, its small integer code in the database."""

    impl = SmallInteger
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> int:
        return ISOLATION_CODE[value]

    def process_result_value(self, value: int | None, dialect: Dialect) -> str | None:
        return None if value is None else ISOLATION_NAME[value]
