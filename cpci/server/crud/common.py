"""Small helpers every crud module uses: insert-if-absent on either engine, and chunking."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy import JSON, Table, Text, type_coerce
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
    engine: two uploads creating the same repository both succeed). Column types and defaults
    apply; for thousands of plain rows use `bulk_insert`."""
    if not rows:
        return
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    statement = insert(table_of(model)).on_conflict_do_nothing(index_elements=list(keys))
    for chunk in chunks(rows, CHUNK // max(1, len(rows[0]))):
        session.execute(statement, list(chunk))


def bulk_insert(
    *,
    session: Session,
    model: type[SQLModel],
    rows: Sequence[Mapping[str, Any]],
    on_conflict_ignore: Sequence[str] = (),
) -> None:
    """One driver-level executemany: the hot path of an upload (thousands of results).

    Bypasses SQLAlchemy's per-value type processing, which costs more than the insert itself;
    JSON columns are serialised here instead, and `None` stays SQL NULL. Only for columns whose
    values the drivers take as they are (numbers, strings, booleans, JSON); no Python defaults.
    """
    if not rows:
        return
    table = table_of(model)
    connection = session.connection()
    dialect = connection.dialect
    columns = list(rows[0])
    json_columns = {c for c in columns if isinstance(table.c[c].type, JSON)}
    quote = dialect.identifier_preparer.quote
    mark = "?" if dialect.paramstyle == "qmark" else "%s"
    sql = (
        f"INSERT INTO {quote(table.name)} ({', '.join(quote(c) for c in columns)}) "
        f"VALUES ({', '.join([mark] * len(columns))})"
    )
    if on_conflict_ignore:
        sql += f" ON CONFLICT ({', '.join(quote(k) for k in on_conflict_ignore)}) DO NOTHING"
    dumps = json.dumps
    values = [
        tuple(
            dumps(row[c]) if c in json_columns and row[c] is not None else row[c] for c in columns
        )
        for row in rows
    ]
    connection.exec_driver_sql(sql, values)


def raw_json(column: Any) -> Any:
    """Select a JSON column without SQLAlchemy decoding it (decode with `from_json`, only the
    values needed): for the report's tens of thousands of rows this halves the load time."""
    return type_coerce(column, Text)


def from_json(value: Any) -> Any:
    """A value selected with `raw_json`: text from SQLite, already decoded by psycopg."""
    return json.loads(value) if isinstance(value, str | bytes) else value
