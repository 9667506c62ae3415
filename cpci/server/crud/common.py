"""Small helpers every crud module uses: insert-if-absent on either engine, and chunking."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, SQLModel

T = TypeVar("T")

#: Stay well under SQLite's and psycopg's bound-parameter limits.
CHUNK = 900


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def table_of(model: type[SQLModel]) -> Table:
    table: Table = model.__table__  # type: ignore[attr-defined]
    return table


def insert_missing(
    *,
    session: Session,
    model: type[SQLModel],
    rows: Sequence[Mapping[str, Any]],
    keys: Sequence[str],
) -> None:
    """Insert `rows`, silently keeping any row whose `keys` already exist (no race on either
    engine: two uploads creating the same config both succeed)."""
    if not rows:
        return
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(table_of(model)).on_conflict_do_nothing(index_elements=list(keys))
    for chunk in chunks(rows, CHUNK // max(1, len(rows[0]))):
        session.execute(statement, list(chunk))
