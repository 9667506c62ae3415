"""The results a test stored, read back whole from the packed tables: what an upload put in
each column, with metrics and batch unpacked and details joined (None where a result has none)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, select

from cpci.server.crud.common import metric_names
from cpci.server.models import Result, ResultDetail
from cpci.server.packed import unpack_batch, unpack_metrics


@dataclass(frozen=True)
class StoredResult:
    id: int
    shard_id: int
    config_id: int
    outcome: str
    attempt: int
    duration_s: float
    flaky: bool
    isolation: str | None
    arrival: bool
    metrics: dict[str, float] | None
    batch: dict[str, Any] | None
    rank_errors: list[dict[str, Any]] | None
    rerun_reason: str | None
    stop_reason: str | None
    order_dependence: dict[str, Any] | None


def stored_results(session: Session) -> list[StoredResult]:
    """Every stored result, in id order."""
    rows = session.exec(
        select(Result, ResultDetail)
        .outerjoin(ResultDetail, col(ResultDetail.result_id) == col(Result.id))
        .order_by(col(Result.id))
    ).all()
    names = metric_names(session, [r.metrics for r, _ in rows])
    out = []
    for r, d in rows:
        assert r.id is not None
        out.append(
            StoredResult(
                id=r.id,
                shard_id=r.shard_id,
                config_id=r.config_id,
                outcome=r.outcome,
                attempt=r.attempt,
                duration_s=r.duration_s,
                flaky=r.flaky,
                isolation=r.isolation,
                arrival=r.arrival,
                metrics=unpack_metrics(r.metrics, names) or None,
                batch=unpack_batch(r.batch),
                rank_errors=d.rank_errors if d else None,
                rerun_reason=d.rerun_reason if d else None,
                stop_reason=d.stop_reason if d else None,
                order_dependence=d.order_dependence if d else None,
            )
        )
    return out
