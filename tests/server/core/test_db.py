"""The engines `cpci.server.core.db` builds, on the real servers."""

from __future__ import annotations

from cpci.server.core.db import create_db_engine


def test_postgres_connections_never_jit_compile(postgres_server: str) -> None:
    """JIT is off on a new connection and stays off on a pooled one after a rollback (a SET
    left in the connection's first transaction would be undone by it)."""
    engine = create_db_engine(postgres_server)
    try:
        for _ in range(2):  # the pool hands back the same connection the second time
            with engine.connect() as conn:
                assert conn.exec_driver_sql("SHOW jit").scalar_one() == "off"
                conn.rollback()
    finally:
        engine.dispose()
