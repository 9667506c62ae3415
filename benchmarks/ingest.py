"""Ingest results/s over real HTTP with the service in its own process, and what it costs whom.

    .venv/bin/python benchmarks/ingest.py [--postgres] [--compare REV] [--profile DIR]

`benchmarks/service.py` runs uvicorn in a thread of the process that also sends the uploads, so
the client's JSON and HTTP work shares one GIL with the service's. Here the service is a child
process (uvicorn, one worker, over a fresh database), the client is this process (16 uploads at
once by default, `service.py`'s workload: runs of 16 shards x 5,000 results), and the CPU
seconds each spent are read apart (the service's from /proc, the client's from its own clock),
so a figure says what an upload costs the service, not the benchmark. On PostgreSQL the server's
CPU seconds are read too (the postmaster, the backends it has reaped and those still alive): the
runs take turns, so what the server spent during one is that service's.

`--compare REV` serves a second database from a git worktree of REV (its `cpci` imported ahead
of this checkout's), and the timed runs alternate between the two services, so both see the
same machine load. `--profile DIR` samples every thread of each service with py-spy (`pip
install py-spy`) during the timed runs and prints the functions where the time went, self and
total; its collapsed stacks are left in DIR. Figures are printed, never enforced.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from service import PER_SHARD, SHARDS, connect, envelope, record  # the same workload
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent
REPOSITORY = "bench/ingest"


def serve_child(url: str, port: int) -> None:
    """The service's process: migrate `url`, print a token for REPOSITORY, serve on `port`."""
    import uvicorn
    from sqlmodel import Session

    from cpci.server import Settings, create_app
    from cpci.server.core.db import create_db_engine
    from cpci.server.core.migrate import upgrade
    from cpci.server.crud.tokens import create_token

    engine = create_db_engine(url)
    upgrade(engine)
    with Session(engine) as session:
        token = create_token(session=session, repository=REPOSITORY).token
        session.commit()
    print(json.dumps({"token": token}), flush=True)
    app = create_app(Settings(database_url=url), engine=engine)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


@dataclass
class Service:
    """One service under test: its process, where it listens, and what its runs measured."""

    label: str
    process: subprocess.Popen[str]
    base: str
    token: str
    rates: list[float] = field(default_factory=list)
    service_cpu: list[float] = field(default_factory=list)
    client_cpu: list[float] = field(default_factory=list)
    database_cpu: list[float] = field(default_factory=list)


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name (state first: ppid is [1])."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (its threads included)."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_cpu_seconds(postmaster: int) -> float:
    """A PostgreSQL server's CPU seconds so far: the postmaster's, its reaped children's (a
    backend that closed its connection) and its live children's."""
    fields = _stat(postmaster)
    ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            child = _stat(int(entry.name))
        except OSError:
            continue  # it ended meanwhile (and is counted in cutime once reaped)
        if int(child[1]) == postmaster:
            ticks += int(child[11]) + int(child[12])
    return ticks / os.sysconf("SC_CLK_TCK")


@contextmanager
def start_service(label: str, url: str, tree: Path | None) -> Iterator[Service]:
    from cpci.server.devpg import free_port

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(tree or ROOT)}
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", url, "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        token = json.loads(process.stdout.readline())["token"]
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        yield Service(label, process, base, token)
    finally:
        process.terminate()
        process.wait(30)


def bodies_of_run(n: int) -> list[bytes]:
    results = [record(i) for i in range(SHARDS * PER_SHARD)]
    commit = f"{n + 1:040x}"
    return [
        envelope(
            REPOSITORY,
            f"r{n}",
            commit,
            s,
            SHARDS,
            results[s * PER_SHARD : (s + 1) * PER_SHARD],
        )
        for s in range(SHARDS)
    ]


def upload_run(
    service: Service, bodies: list[bytes], uploads: int, postmaster: int | None = None
) -> None:
    """Upload one run's shards, `uploads` at once, and record the rate and the CPU costs."""
    headers = {"Authorization": f"Bearer {service.token}", "content-type": "application/json"}
    local = threading.local()

    def send(body: bytes) -> None:
        if not hasattr(local, "http"):
            local.http = httpx.Client(base_url=service.base, headers=headers, timeout=600)
        response = local.http.post("/api/v1/uploads", content=body)
        assert response.status_code == 201, response.text

    served, sent = cpu_seconds(service.process.pid), time.process_time()
    stored = server_cpu_seconds(postmaster) if postmaster else 0.0
    start = time.perf_counter()
    with ThreadPoolExecutor(uploads) as pool:
        list(pool.map(send, bodies))
    seconds = time.perf_counter() - start
    service.rates.append(SHARDS * PER_SHARD / seconds)
    service.service_cpu.append(cpu_seconds(service.process.pid) - served)
    service.client_cpu.append(time.process_time() - sent)
    if postmaster:
        service.database_cpu.append(server_cpu_seconds(postmaster) - stored)


@contextmanager
def sampled(services: list[Service], folder: Path | None) -> Iterator[None]:
    """py-spy on each service while the timed runs go, when a folder is given."""
    if folder is None:
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    spies = [
        subprocess.Popen(
            [
                str(Path(sys.executable).parent / "py-spy"),
                "record",
                "--pid",
                str(s.process.pid),
                "--format",
                "raw",
                "--rate",
                "200",
                "--gil",
                "--output",
                str(folder / f"{s.label}.txt"),
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for s in services
    ]
    try:
        yield
    finally:
        for spy in spies:
            spy.send_signal(2)  # SIGINT: py-spy writes its file and exits
            spy.wait(60)


def print_profile(path: Path, top: int = 25) -> None:
    """The functions of the collapsed stacks in `path` that held the most samples, self and
    total, as shares of the samples (each taken of the thread holding the GIL)."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")[1:]  # the first is the thread
        if not frames:
            continue
        n = int(count)
        samples += n
        names = [_function(f) for f in frames]
        own[names[-1]] += n
        for name in set(names):
            total[name] += n
    print(f"-- {path.stem}: {samples:,} busy samples; total (self) --")
    for name, n in total.most_common(top):
        print(f"  {100 * n / samples:5.1f}% ({100 * own[name] / samples:4.1f}%)  {name}")


def _function(frame: str) -> str:
    """`name (path/file.py:line)` as `name file.py`: a function's samples at any line."""
    name, _, where = frame.partition(" (")
    return f"{name} {where.rsplit('/', 1)[-1].split(':')[0]}"


def postmaster_of(url: str) -> int:
    """The pid of the PostgreSQL server behind `url` (the parent of a backend it serves)."""
    with connect(url) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(_stat(int(row[0]))[1])


def databases(postgres: bool, labels: list[str], stack: ExitStack) -> dict[str, str]:
    """A fresh database URL per label: SQLite files, or databases of a throwaway PostgreSQL."""
    if not postgres:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        return {label: f"sqlite:///{tmp}/{label}.db" for label in labels}
    from cpci.server.devpg import find_binaries, throwaway_postgres

    bindir = find_binaries()
    if bindir is None:
        raise SystemExit("no PostgreSQL binaries found")
    admin = stack.enter_context(throwaway_postgres(bindir))
    urls = {}
    with connect(admin) as conn:
        for i, label in enumerate(labels):
            conn.execute(f"CREATE DATABASE bench{i}")
            urls[label] = (
                make_url(admin).set(database=f"bench{i}").render_as_string(hide_password=False)
            )
    return urls


@contextmanager
def worktree(rev: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev],
            check=True,
            capture_output=True,
        )
        try:
            yield tree
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=True
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL (default SQLite)")
    parser.add_argument("--rounds", type=int, default=5, help="timed runs of 80,000 results")
    parser.add_argument("--uploads", type=int, default=16, help="uploads at once")
    parser.add_argument("--compare", metavar="REV", help="also serve git revision REV")
    parser.add_argument("--profile", metavar="DIR", type=Path, help="py-spy each service")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve_child(args.serve, args.port)
        return
    with ExitStack() as stack:
        trees: dict[str, Path | None] = {"now": None}
        if args.compare:
            trees = {args.compare: stack.enter_context(worktree(args.compare)), "now": None}
        urls = databases(args.postgres, list(trees), stack)
        postmaster = postmaster_of(next(iter(urls.values()))) if args.postgres else None
        services = [
            stack.enter_context(start_service(label, urls[label], tree))
            for label, tree in trees.items()
        ]
        for service in services:  # the first run creates the 80,000 configs: not timed
            upload_run(service, bodies_of_run(0), args.uploads)
        runs = [bodies_of_run(n) for n in range(1, args.rounds + 1)]
        with sampled(services, args.profile):
            for bodies in runs:
                for service in services:
                    upload_run(service, bodies, args.uploads, postmaster)
    engine = "PostgreSQL" if args.postgres else "SQLite"
    load = os.getloadavg()
    print(f"== ingest on {engine}, {args.uploads} uploads at once; load {load[0]:.1f} ==")
    server = f" {'PostgreSQL CPU s':>17}" if postmaster else ""
    print(
        f"  {'':10} {'results/s':>10} {'service CPU s':>14} {'client CPU s':>13}{server}  (per run)"
    )
    for s in services:
        stored = f" {statistics.median(s.database_cpu[1:]):17.2f}" if postmaster else ""
        print(
            f"  {s.label:10} {statistics.median(s.rates[1:]):10,.0f} "
            f"{statistics.median(s.service_cpu[1:]):14.2f} "
            f"{statistics.median(s.client_cpu[1:]):13.2f}{stored}"
        )
    if args.profile:
        for s in services:
            print_profile(args.profile / f"{s.label}.txt")


if __name__ == "__main__":
    main()
