"""A throwaway PostgreSQL server for tests and benchmarks, started from the local binaries.

`initdb` refuses to run as root, so under root the server runs as user `postgres`. It listens on
127.0.0.1 only, keeps its socket in its own temp dir, and trades durability for speed (fsync off):
it exists for minutes and holds nothing worth keeping.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BIN_DIRS = ("/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin", "/usr/local/pgsql/bin")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def find_binaries() -> Path | None:
    """The directory holding initdb and pg_ctl (`CPCI_TEST_PG_BIN`, known places, PATH)."""
    candidates = [os.environ.get("CPCI_TEST_PG_BIN", ""), *BIN_DIRS]
    found = shutil.which("initdb")
    if found:
        candidates.append(str(Path(found).parent))
    for directory in candidates:
        if directory and (Path(directory) / "initdb").exists():
            return Path(directory)
    return None


@contextmanager
def throwaway_postgres(bindir: Path) -> Iterator[str]:
    """Start a server, yield its admin URL (database `postgres`), stop and delete it after."""
    root = Path(tempfile.mkdtemp(prefix="cpci-pg-"))
    prefix: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    data = root / "data"
    pg_ctl = [*prefix, str(bindir / "pg_ctl"), "-D", str(data)]
    try:
        subprocess.run(
            [
                *prefix,
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
        )
        port = free_port()
        options = (
            f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        subprocess.run(
            [*pg_ctl, "-o", options, "-l", str(root / "log"), "-w", "-t", "60", "start"],
            check=True,
            capture_output=True,
        )
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*pg_ctl, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
