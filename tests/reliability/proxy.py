"""A loopback TCP proxy that hands each new connection to the next backend in turn.

What a load balancer in front of service replicas does, small enough to read: one asyncio loop
on its own thread, each accepted connection spliced byte for byte to a backend chosen round
robin; a backend that refuses (a replica killed and not yet back) is skipped for the next one,
so clients see what they would behind a real balancer with health checks: a cut connection for
requests in flight on the killed replica, and new connections landing on the live one.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field


@dataclass
class ProxyCounts:
    """Connections per backend: taken (spliced to it) and open now."""

    taken: list[int]
    open: list[int]
    refused: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


class RoundRobinProxy:
    """Listens on 127.0.0.1 (`url`), forwarding to `backends` (host, port) in turn."""

    def __init__(self, backends: Sequence[tuple[str, int]]) -> None:
        self.backends = list(backends)
        self.counts = ProxyCounts([0] * len(backends), [0] * len(backends))
        self._turn = itertools.count()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(target=self._run, name="round-robin-proxy", daemon=True)
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def open_to(self, backend: int) -> int:
        """Connections open to `backend` now (an upload in flight on that replica)."""
        with self.counts.lock:
            return self.counts.open[backend]

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the proxy did not start listening within 30 s")

    def stop(self) -> None:
        """Stop listening, cut the connections still open, and close the loop."""

        async def close() -> None:
            if self._server is not None:
                self._server.close()
            spliced = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in spliced:
                task.cancel()
            await asyncio.gather(*spliced, return_exceptions=True)
            if self._server is not None:
                with suppress(Exception):
                    await asyncio.wait_for(self._server.wait_closed(), 5)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._accept, "127.0.0.1", 0, backlog=256)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        start = next(self._turn)
        for step in range(len(self.backends)):
            index = (start + step) % len(self.backends)
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.backends[index])
            except OSError:
                continue
            with self.counts.lock:
                self.counts.taken[index] += 1
                self.counts.open[index] += 1
            try:
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            finally:
                with self.counts.lock:
                    self.counts.open[index] -= 1
            return
        with self.counts.lock:
            self.counts.refused += 1
        writer.close()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy until either side ends; a reset on one side closes the other (a cut connection)."""
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with suppress(Exception):
            sink.close()


@contextmanager
def round_robin(backends: Sequence[tuple[str, int]]) -> Iterator[RoundRobinProxy]:
    """A started proxy in front of `backends`, stopped after the block."""
    proxy = RoundRobinProxy(backends)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
