"""Small helpers every crud module uses: insert-if-absent on either engine, chunking, and the
driver-level bulk insert and reads of the hot paths (uploads, reports)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from pydantic_core import to_json
from sqlalchemy import Table, Text, type_coerce
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session, SQLModel

from cpci.server.packed import metric_ids

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
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    on_conflict_ignore: Sequence[str] = (),
) -> None:
    """Insert thousands of rows in one go: the hot path of an upload.

    `rows` are tuples in the order of `columns`, holding what the drivers take as they are
    (numbers, strings, booleans, None) and JSON columns as `json_text`: SQLAlchemy's per-value
    type processing would cost more than the insert itself. No Python-side defaults apply.
    PostgreSQL gets COPY (several times faster than even a pipelined executemany) unless
    conflicts must be ignored; SQLite one executemany.
    """
    if not rows:
        return
    table = table_of(model)
    connection = session.connection()
    dialect = connection.dialect
    quote = dialect.identifier_preparer.quote
    names = ", ".join(quote(c) for c in columns)
    if dialect.name == "postgresql" and not on_conflict_ignore:
        sql = f"COPY {quote(table.name)} ({names}) FROM STDIN"
        with _driver_cursor(connection, sql) as cursor, cursor.copy(sql) as copy:
            for row in rows:
                copy.write_row(row)
        return
    marks = ", ".join(["?" if dialect.paramstyle == "qmark" else "%s"] * len(columns))
    sql = f"INSERT INTO {quote(table.name)} ({names}) VALUES ({marks})"
    if on_conflict_ignore:
        sql += f" ON CONFLICT ({', '.join(quote(k) for k in on_conflict_ignore)}) DO NOTHING"
    with _driver_cursor(connection, sql) as cursor:
        cursor.executemany(sql, rows)


def json_text(value: Any) -> str | None:
    """A JSON column's value for `bulk_insert`, serialised by pydantic's encoder (several times
    faster than `json.dumps`; NaN and infinities written as `json.dumps` writes them). Empty
    and None values become SQL NULL."""
    if not value:
        return None
    return to_json(value, inf_nan_mode="constants").decode()


def fetch_rows(session: Session, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows as plain tuples straight from the driver, for reads of tens of thousands of rows
    where SQLAlchemy's per-row processing would cost more than the query.

    Write `sql` with `?` marks (no other `?` or `%`): they become `%s` for psycopg. Values come
    back raw: SQLite's booleans are 0/1, timestamps text, JSON columns text (see `from_json`).
    """
    connection = session.connection()
    if connection.dialect.paramstyle != "qmark":
        sql = sql.replace("?", "%s")
    with _driver_cursor(connection, sql) as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


@contextmanager
def _driver_cursor(connection: Connection, sql: str) -> Iterator[Any]:
    """A DBAPI cursor in the session's transaction; driver errors become SQLAlchemy's (an
    IntegrityError stays an IntegrityError, as if the statement had gone through SQLAlchemy)."""
    cursor = connection.connection.cursor()
    dbapi_error = connection.dialect.loaded_dbapi.Error
    try:
        yield cursor
    except dbapi_error as exc:
        raise DBAPIError.instance(sql, None, exc, dbapi_error, dialect=connection.dialect) from exc
    finally:
        cursor.close()


def metric_names(session: Session, packed: Iterable[bytes | memoryview | None]) -> dict[int, str]:
    """The names of the metrics stored `packed` values refer to, by id (one query; read them
    back with `cpci.server.packed.unpack_metrics`)."""
    ids = set().union(*(metric_ids(p) for p in packed))
    if not ids:
        return {}
    member, values = one_of(session, sorted(ids))
    rows = fetch_rows(session, f"SELECT id, name FROM metric_name WHERE id{member}", values)
    return {int(pk): str(name) for pk, name in rows}


def one_of(session: Session, values: Iterable[Any]) -> tuple[str, Any]:
    """`column{sql}` with one bound parameter `param`: membership in any number of values,
    without a statement per few hundred of them or thousands of bound parameters."""
    if session.get_bind().dialect.name == "postgresql":
        return " = ANY(?)", list(values)
    return " IN (SELECT value FROM json_each(?))", json.dumps(list(values))


def one_of_texts(session: Session, texts: Iterable[str]) -> tuple[str, Any]:
    """`one_of` for strings, on PostgreSQL as one JSON text the server unnests: psycopg dumps a
    list parameter element by element, in Python (an upload's 5,000 config keys: ~7 ms, a
    twentieth of the service's time for it), where `json.dumps` runs in C (~1 ms)."""
    if session.get_bind().dialect.name != "postgresql":
        return one_of(session, texts)
    return (
        " = ANY(ARRAY(SELECT json_array_elements_text(?::json)))",
        json.dumps(list(texts), ensure_ascii=False),
    )


def raw_json(column: Any) -> Any:
    """Select a JSON column without SQLAlchemy decoding it (decode with `from_json`, only the
    values needed): for the report's tens of thousands of rows this halves the load time."""
    return type_coerce(column, Text)


def from_json(value: Any) -> Any:
    """A JSON column's value read raw (`raw_json`, `fetch_rows`): text from SQLite, already
    decoded by psycopg."""
    return json.loads(value) if isinstance(value, str | bytes) else value
