"""The driver-level helpers behind uploads and reports, on both engines."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from cpci.server.crud.common import bulk_insert, fetch_rows, json_text, one_of, one_of_texts
from cpci.server.crud.repos import ensure_repository
from cpci.server.models import Config

COLUMNS = ("repository_id", "key", "nodeid", "world_size", "params")
Membership = Callable[[Session, list[str]], tuple[str, Any]]


@pytest.mark.parametrize("membership", [one_of, one_of_texts])
def test_bulk_insert_then_fetch_by_membership(engine: Engine, membership: Membership) -> None:
    with Session(engine) as session:
        repo = ensure_repository(session=session, name="acme/attn")
        rows = [
            (repo, f"t[{i}]@2", f"t[{i}]", 2, json_text({"i": i, "name": "ü"} if i % 2 else {}))
            for i in range(2_000)
        ]
        bulk_insert(session=session, model=Config, columns=COLUMNS, rows=rows)
        session.commit()
        wanted = [f"t[{i}]@2" for i in range(0, 2_000, 3)] + ["absent@2"]
        member, values = membership(session, wanted)
        sql = f"SELECT key, world_size FROM config WHERE key{member}"
        found = dict(fetch_rows(session, sql, values))
        assert found == {key: 2 for key in wanted[:-1]}
        stored = session.exec(select(Config).where(Config.key == "t[1]@2")).one()
        assert stored.params == {"i": 1, "name": "ü"}  # the ORM reads what the driver wrote
        assert session.exec(select(Config).where(Config.key == "t[0]@2")).one().params is None


def test_membership_in_texts_matches_each_text_exactly(engine: Engine) -> None:
    """Keys with what JSON, arrays or SQL escape (quotes, backslashes, braces and commas, line
    breaks, non-ASCII past the BMP, an empty key) match themselves only; an empty list, none."""
    keys = ['q"uote', "back\\slash", "{brace,comma}", "'single'", "NULL", "", " spaced "]
    keys += ["tab\there", "new\nline", "\u2028sep", "ü", "emoji 😀", "u@2", "t[1]@2"]
    with Session(engine) as session:
        repo = ensure_repository(session=session, name="acme/attn")
        rows = [(repo, key, key or "-", 2, None) for key in keys]
        bulk_insert(session=session, model=Config, columns=COLUMNS, rows=rows)

        def found(wanted: list[str]) -> list[str]:
            member, values = one_of_texts(session, wanted)
            sql = f"SELECT key FROM config WHERE repository_id = ? AND key{member}"
            return sorted(key for (key,) in fetch_rows(session, sql, repo, values))

        assert found(keys) == sorted(keys)
        for key in keys:
            assert found([key, "absent"]) == [key]
        assert found(["\\", 'q\\"uote', "{brace", "t[1]"]) == []
        assert found([]) == []


def test_bulk_insert_ignores_conflicts_when_asked(engine: Engine) -> None:
    with Session(engine) as session:
        repo = ensure_repository(session=session, name="acme/attn")
        row = (repo, "t@2", "t", 2, None)
        bulk_insert(session=session, model=Config, columns=COLUMNS, rows=[row])
        bulk_insert(
            session=session,
            model=Config,
            columns=COLUMNS,
            rows=[row, (repo, "u@2", "u", 2, None)],
            on_conflict_ignore=["repository_id", "key"],
        )
        assert fetch_rows(session, "SELECT count(*) FROM config") == [(2,)]


def test_driver_errors_are_sqlalchemy_errors(engine: Engine) -> None:
    """A concurrent upload's clash must reach the caller as an IntegrityError (it retries)."""
    with Session(engine) as session:
        repo = ensure_repository(session=session, name="acme/attn")
        session.commit()

        def insert(rows: list[tuple[object, ...]]) -> None:
            bulk_insert(session=session, model=Config, columns=COLUMNS, rows=rows)

        with pytest.raises(IntegrityError):  # no such repository: a foreign key violation
            insert([(repo + 1, "t@2", "t", 2, None)])
        session.rollback()
        with pytest.raises(IntegrityError):  # the same key twice
            insert([(repo, "t@2", "t", 2, None)] * 2)


def test_json_text_keeps_values_and_writes_empty_as_null() -> None:
    assert json_text({"max_abs_err": 1e-4, "n": 3}) == '{"max_abs_err":0.0001,"n":3}'
    assert json_text([]) is None
    assert json_text(None) is None
    assert json_text({"x": float("inf")}) == '{"x":Infinity}'  # as json.dumps writes it
