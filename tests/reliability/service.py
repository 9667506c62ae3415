"""A real `cpci serve` process on 127.0.0.1, and many uploaders against it.

`Served` starts the service as an admin would (a subprocess, migrations at start), can SIGKILL it
and start it again on the same port and database; `StorePause` arms it to stop mid-store (at the
point `tests/reliability/paused_serve.py` signals), so that a kill lands there. `load` runs
concurrent uploaders, each one CI run of several shards sent with the real uploader
(`cpci.upload.send.deliver`: retries, spool), and `count_stored` reads the database directly to
see what was stored, so a lost or doubled result cannot hide behind the API. Shared by the tests
here and `benchmarks/reliability_load.py`.
"""

from __future__ import annotations

import hashlib
import os
import select as io_select
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func
from sqlmodel import Session, col, select

from cpci.schema import RunEnvelope, UploadReceipt
from cpci.server.core.db import create_db_engine
from cpci.server.devpg import free_port
from cpci.server.models import Config, Repository, Result, Run, Shard
from cpci.upload.send import Backoff, deliver, flush
from cpci.upload.spool import Binding, Spool
from tests import builders
from tests.builders import REPO
from tests.reliability.paused_serve import PAUSED
from tests.server.databases import migrate_with_token

START_DEADLINE_S = 60
#: `cpci serve`, as `python ARGV` runs it.
SERVE = ("-m", "cpci", "serve")


def prepare_database(url: str) -> str:
    """Migrate `url` and return an upload token for REPO."""
    engine = create_db_engine(url)
    try:
        return migrate_with_token(engine, name="reliability")
    finally:
        engine.dispose()


class Served:
    """`cpci serve` as a subprocess (with `env`'s settings too; `argv` to run it otherwise, as
    `StorePause` does); `kill()` is a SIGKILL, `start()` brings it back."""

    def __init__(
        self,
        database_url: str,
        log: Path,
        port: int | None = None,
        env: Mapping[str, str] | None = None,
        argv: Sequence[str] = SERVE,
    ) -> None:
        self.database_url = database_url
        self.env = dict(env or {})
        self.argv = tuple(argv)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        env = {
            **os.environ,
            **self.env,
            "CPCI_DATABASE_URL": self.database_url,
            "CPCI_PORT": str(self.port),
            "CPCI_HOST": "127.0.0.1",
        }
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, *self.argv],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1
        deadline = time.monotonic() + START_DEADLINE_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"cpci serve exited early:\n{self.log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"cpci serve did not answer /healthz in {START_DEADLINE_S} s")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no shutdown handler runs, an open transaction is simply cut off."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


@contextmanager
def served(database_url: str, log: Path, env: Mapping[str, str] | None = None) -> Iterator[Served]:
    service = Served(database_url, log, env=env)
    service.start()
    try:
        yield service
    finally:
        service.stop()


def make_envelope(run: str, shard: int, shards: int, results: int, **fields: Any) -> RunEnvelope:
    """One shard of CI run `run`: `results` configs, distinct across the run's shards, every
    seventh failing."""
    records = [
        builders.record(
            f"{run}-s{shard}-c{i}",
            "failed" if i % 7 == 3 else "passed",
            duration_s=0.01 * (i % 13),
            metrics={"max_abs_err": i * 1e-6},
            message=f"boom {i}" if i % 7 == 3 else None,
        )
        for i in range(results)
    ]
    return builders.envelope(
        records,
        commit=hashlib.sha1(run.encode()).hexdigest(),
        ci_run_id=run,
        shard_index=shard,
        shard_total=shards,
        environment={"torch": "2.4.0", "backend": "gloo"},
        **fields,
    )


@dataclass
class LoadReport:
    uploaders: int
    shards: int
    results_per_shard: int
    latencies_s: list[float] = field(default_factory=list)
    receipts: list[UploadReceipt] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def expected_results(self) -> int:
        return self.uploaders * self.shards * self.results_per_shard

    def percentile(self, q: float) -> float:
        if len(self.latencies_s) < 2:
            return self.latencies_s[0] if self.latencies_s else float("nan")
        return statistics.quantiles(self.latencies_s, n=100, method="inclusive")[int(q) - 1]


def load(
    url: str,
    token: str,
    spool_root: Path,
    *,
    uploaders: int,
    shards: int,
    results: int,
    resend_every: int = 5,
) -> LoadReport:
    """`uploaders` threads at once, each one CI run uploading its `shards` shards in turn.

    Every `resend_every`-th shard is sent twice (as a retry after a lost answer would): the
    second must come back `duplicate` and store nothing.
    """
    report = LoadReport(uploaders, shards, results)
    lock = threading.Lock()
    backoff = Backoff(attempts=6, base_s=0.2, max_s=2.0)

    def uploader(u: int) -> None:
        spool = Spool(spool_root / f"u{u}")
        for s in range(shards):
            envelope = make_envelope(f"load-{u}", s, shards, results)
            sends = 2 if (u * shards + s) % resend_every == 0 else 1
            for _ in range(sends):
                start = time.perf_counter()
                try:
                    done = deliver(url, lambda: token, envelope, spool=spool, backoff=backoff)
                except Exception as exc:  # a refusal: reported, never swallowed
                    with lock:
                        report.errors.append(f"uploader {u} shard {s}: {exc}")
                    continue
                elapsed = time.perf_counter() - start
                with lock:
                    if done.receipt is None:
                        report.errors.append(f"uploader {u} shard {s} spooled: {done.error}")
                    else:
                        report.latencies_s.append(elapsed)
                        report.receipts.append(done.receipt)

    start = time.perf_counter()
    with ThreadPoolExecutor(uploaders) as pool:
        list(pool.map(uploader, range(uploaders)))
    report.wall_s = time.perf_counter() - start
    return report


@dataclass(frozen=True)
class Stored:
    runs: int
    shards: int
    results: int
    configs: int
    per_shard: dict[tuple[str, int], tuple[int, int]]  # (run, shard) -> (rows, result_count)
    repositories: tuple[str, ...]


def count_stored(database_url: str) -> Stored:
    """What the database holds, read directly (not through the service)."""
    engine = create_db_engine(database_url)
    try:
        with Session(engine) as session:
            rows = session.exec(
                select(
                    Run.ci_run_id, Shard.shard_index, Shard.result_count, func.count(col(Result.id))
                )
                .join(Shard, Shard.run_id == Run.id)  # type: ignore[arg-type]
                .outerjoin(Result, Result.shard_id == Shard.id)  # type: ignore[arg-type]
                .group_by(col(Run.ci_run_id), col(Shard.shard_index), col(Shard.result_count))
            ).all()
            return Stored(
                runs=session.exec(select(func.count()).select_from(Run)).one(),
                shards=session.exec(select(func.count()).select_from(Shard)).one(),
                results=session.exec(select(func.count()).select_from(Result)).one(),
                configs=session.exec(select(func.count()).select_from(Config)).one(),
                per_shard={(r, s): (n, c) for r, s, c, n in rows},
                repositories=tuple(session.exec(select(Repository.name)).all()),
            )
    finally:
        engine.dispose()


def check_load(report: LoadReport, stored: Stored) -> list[str]:
    """Everything wrong with a load run: lost, doubled or partial shards, refused uploads."""
    problems = list(report.errors)
    want_shards = {(f"load-{u}", s) for u in range(report.uploaders) for s in range(report.shards)}
    missing = want_shards - stored.per_shard.keys()
    problems += [f"shard {k} lost" for k in sorted(missing)]
    for key, (rows, declared) in sorted(stored.per_shard.items()):
        if rows != declared or rows != report.results_per_shard:
            problems.append(f"shard {key}: {rows} rows, declared {declared}")
    if stored.results != report.expected_results:
        problems.append(f"{stored.results} results stored, want {report.expected_results}")
    if stored.shards != len(want_shards):
        problems.append(f"{stored.shards} shards stored, want {len(want_shards)}")
    statuses = [r.status for r in report.receipts]
    if statuses.count("stored") != len(want_shards):
        problems.append(f"{statuses.count('stored')} 'stored' receipts, want {len(want_shards)}")
    return problems


class PausingTransport(httpx.HTTPTransport):
    """Sends the first request's body in two parts and waits between them until released.

    `reached` is set once the first `fraction` of the body is on the wire, so the test can kill
    the service at a known point of the upload: mid-body (`fraction` < 1) or after the whole body
    while the service parses and stores it (`fraction` == 1). Later requests (the uploader's
    retries) go through untouched. `close` is a no-op: the uploader closes its client after each
    attempt, and the retries need this transport again.
    """

    def __init__(self, fraction: float) -> None:
        super().__init__()
        self.fraction = fraction
        self.reached = threading.Event()
        self.release = threading.Event()
        self.requests = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        if self.requests == 1:
            body = request.read()
            cut = int(len(body) * self.fraction)
            request.stream = _TwoParts(body[:cut], body[cut:], self.reached, self.release)
        return super().handle_request(request)

    def close(self) -> None:
        pass

    def really_close(self) -> None:
        super().close()


class _TwoParts(httpx.SyncByteStream):
    def __init__(
        self, first: bytes, rest: bytes, reached: threading.Event, release: threading.Event
    ) -> None:
        self.parts, self.reached, self.release = (first, rest), reached, release

    def __iter__(self) -> Iterator[bytes]:
        yield self.parts[0]
        self.reached.set()
        self.release.wait(60)
        if self.parts[1]:
            yield self.parts[1]


class StorePause:
    """The test's side of `paused_serve`: a FIFO in `directory` the paused service writes to
    once a shard's rows are written and its transaction is still open."""

    def __init__(self, directory: Path) -> None:
        self.fifo = directory / "store-paused"
        os.mkfifo(self.fifo)

    @property
    def argv(self) -> tuple[str, ...]:
        """`cpci serve`, armed to pause mid-store."""
        return ("-m", "tests.reliability.paused_serve", str(self.fifo))

    def wait(self, timeout_s: float) -> bool:
        """Block until the service says it paused mid-store: False if it did not within
        `timeout_s` (a bound on a broken run, not a synchronisation)."""
        fd = os.open(self.fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            readable, _, _ = io_select.select([fd], [], [], timeout_s)
            return bool(readable) and os.read(fd, 4096).decode().startswith(PAUSED)
        finally:
            os.close(fd)


@dataclass
class KillReport:
    phase: str
    paused_mid_store: bool
    committed_before_kill: bool
    partial_after_kill: list[str]
    statuses: list[str]
    problems: list[str]


def kill_mid_upload(
    service: Served,
    token: str,
    spool_dir: Path,
    *,
    run: str,
    results: int,
    fraction: float,
    store_delay_s: float = 0.0,
    pause: StorePause | None = None,
) -> KillReport:
    """Upload one large shard, SIGKILL the service mid-upload, restart it, let the retry finish.

    `fraction` < 1 kills with part of the body unsent; `fraction` == 1 sends it all, then kills
    where `pause` says the store is half done (the service must run `pause.argv`; the restart
    runs `cpci serve` itself), or, without one, after `store_delay_s` (the benchmark's random
    kill points, which may land before, in or after the store). Checks, with the service dead,
    that no partial shard is visible, and after the retry that the run holds exactly the
    uploaded results.
    """
    phase = "receiving" if fraction < 1 else "storing"
    envelope = make_envelope(run, 0, 1, results)
    transport = PausingTransport(fraction)
    spool = Spool(spool_dir)
    backoff = Backoff(attempts=40, base_s=0.1, max_s=0.5)
    outcome: dict[str, Any] = {}

    def upload() -> None:
        try:
            outcome["done"] = deliver(
                service.url,
                lambda: token,
                envelope,
                spool=spool,
                backoff=backoff,
                transport=transport,
            )
        except Exception as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=upload)
    thread.start()
    problems: list[str] = []
    paused = False
    try:
        if not transport.reached.wait(120):
            problems.append("the upload never started")
        if fraction >= 1:
            transport.release.set()
            if pause is not None:
                paused = pause.wait(120)
                if not paused:
                    problems.append("the service never paused mid-store")
            else:
                time.sleep(store_delay_s)  # a random kill point (the benchmark's), not a wait
        service.kill()
    finally:
        transport.release.set()
    service.argv = SERVE
    stored = count_stored(service.database_url).per_shard.get((run, 0))
    partial = [] if stored is None or stored[0] == stored[1] == results else [f"{run}: {stored}"]
    service.start()
    thread.join(timeout=180)
    if thread.is_alive():
        problems.append("the uploader did not finish within 180 s of the restart")
    transport.really_close()
    statuses: list[str] = []
    if "error" in outcome:
        problems.append(f"the upload was refused: {outcome['error']}")
    elif "done" in outcome:
        done = outcome["done"]
        if done.receipt is None:  # every retry fell in the restart: the spool holds it
            flushed = flush(spool, Binding(service.url, REPO), lambda: token, backoff=backoff)
            receipts, left, rejected = flushed.receipts, flushed.left, flushed.rejected
            statuses = [r.status for r in receipts]
            if left or rejected:
                problems.append(f"spool flush left {left}, rejected {rejected}")
        else:
            statuses = [done.receipt.status]
    final = count_stored(service.database_url).per_shard.get((run, 0))
    if final != (results, results):
        problems.append(f"after the retry shard 0 of {run} holds {final}, want {results} rows")
    # Stored before the kill: the answer may or may not have got out before it.
    allowed = {"stored", "duplicate"} if stored is not None else {"stored"}
    if len(statuses) != 1 or statuses[0] not in allowed:
        problems.append(f"receipts {statuses}, want one of {sorted(allowed)}")
    problems += [f"partial shard visible after the kill: {p}" for p in partial]
    return KillReport(phase, paused, stored is not None, partial, statuses, problems)
