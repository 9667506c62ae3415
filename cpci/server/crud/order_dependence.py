"""The order dependences a config's results recorded: after which predecessors it failed.

The runner bisects an order-dependent failure and records the polluter (`cpci.schema.
OrderDependence`) on the result it settles as `order-dependent`; the config page lists the
pairs seen. The results are read the way a report reads them (`crud.runs.results_of`), from the
newest shards where the config was order-dependent.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session, col, select

from cpci.schema import OrderDependence
from cpci.server.crud.runs import results_of
from cpci.server.models import Result, Run, Shard

#: Shards read at most: the newest where the config was found order-dependent.
SHARDS = 20
#: Order-dependent results of the config read per shard wanted (its replays' attempts share one).
PER_SHARD = 4


@dataclass(frozen=True)
class OrderDependenceSeen:
    """What the newest order-dependent results of one config recorded, and where."""

    found: list[OrderDependence]
    ci_run_ids: list[str]  # the runs they were seen in, newest first


def order_dependence_seen(
    *, session: Session, config_pk: int, shards: int = SHARDS
) -> OrderDependenceSeen:
    """The order dependences recorded by `config_pk`'s results in its newest `shards`
    order-dependent shards (two queries: the shards, then their results)."""
    newest = (
        select(Result.shard_id)
        .where(Result.config_id == config_pk, Result.isolation == "order-dependent")
        .order_by(col(Result.id).desc())
        .limit(shards * PER_SHARD)
    )
    ids = list(dict.fromkeys(session.exec(newest)))[:shards]
    if not ids:
        return OrderDependenceSeen([], [])
    rows = session.exec(
        select(Shard, Run.ci_run_id)
        .join(Run, col(Shard.run_id) == col(Run.id))
        .where(col(Shard.id).in_(ids))
        .order_by(col(Shard.id).desc())
    ).all()
    views = results_of(session=session, shards=[shard for shard, _ in rows]).get(config_pk, [])
    found = [v.order_dependence for v in views if v.order_dependence is not None]
    return OrderDependenceSeen(found, list(dict.fromkeys(run for _, run in rows)))
