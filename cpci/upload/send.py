"""Sending an envelope to the result service, with retries, and a spool when it stays down.

Nothing is lost: a send that cannot get through (no answer, 429, 5xx) after its retries goes to
the disk spool, and the spool is flushed, oldest first, before every later upload (or by
`cpci upload --flush`). A refusal that a retry cannot fix (401, 403, 409, 413, 422) is raised at
once and not spooled. The service's ingest is idempotent, so a resend never duplicates.

A flush sends only the items bound to this upload's server and repository (see `spool.Binding`):
the current credentials never travel to a server named in a spool file, and never vouch for an
upload made for another repository.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from cpci.schema import RunEnvelope
from cpci.upload.spool import Binding, Spool

UPLOAD_PATH = "/api/v1/uploads"
#: Statuses worth another try: the service (or a proxy in front of it) is overloaded or restarting.
RETRYABLE = frozenset({408, 429, 500, 502, 503, 504})


class UploadFailed(RuntimeError):
    """The service refused the upload or could not be reached; `status` 0 means no answer."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status

    @property
    def retryable(self) -> bool:
        return self.status == 0 or self.status in RETRYABLE


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter; `sleep` and `jitter` are injectable for tests."""

    attempts: int = 5
    base_s: float = 1.0
    max_s: float = 30.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    jitter: Callable[[float, float], float] = field(default=random.uniform, repr=False)

    def wait(self, attempt: int) -> None:
        """Sleep after failed attempt `attempt` (1-based)."""
        self.sleep(self.jitter(0.0, min(self.max_s, self.base_s * 2 ** (attempt - 1))))


@dataclass
class Delivered:
    """What one `deliver` did: this upload's receipt (None when spooled) and the spool's state."""

    receipt: dict[str, Any] | None
    spooled: Path | None = None
    flushed: list[dict[str, Any]] = field(default_factory=list)
    still_spooled: int = 0
    error: str = ""
    rejected: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Flushed:
    """What a flush did: receipts, items of this binding still waiting (the server is still
    unreachable), items refused for good (set aside), and one-line notes (items bound elsewhere
    left in place, unreadable files set aside)."""

    receipts: list[dict[str, Any]] = field(default_factory=list)
    left: int = 0
    rejected: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def send_with_retries(
    server: str,
    token: str,
    envelope: RunEnvelope,
    *,
    backoff: Backoff,
    transport: httpx.BaseTransport | None = None,
) -> dict[str, Any]:
    for attempt in range(1, backoff.attempts + 1):
        try:
            return send_envelope(server, token, envelope, transport=transport)
        except UploadFailed as exc:
            if not exc.retryable or attempt == backoff.attempts:
                raise
            backoff.wait(attempt)
    raise AssertionError("unreachable")  # the loop returns or raises


def flush(
    spool: Spool,
    binding: Binding,
    token: Callable[[], str],
    *,
    backoff: Backoff,
    transport: httpx.BaseTransport | None = None,
) -> Flushed:
    """Send the spooled items bound to `binding`, oldest first; stop at the first that still
    cannot get through. Items bound elsewhere are left in place, untouched, with a note."""
    scan = spool.scan()
    done = Flushed(notes=[f"set aside {line}" for line in scan.set_aside])
    mine = []
    for item in scan.items:
        why = binding.refuses(item.binding)
        if why is None:
            mine.append(item)
        else:
            done.notes.append(f"left {item.path.name} in the spool: {why}")
    for position, item in enumerate(mine):
        claimed = spool.claim(item)
        if claimed is None:
            continue  # a concurrent flush is sending it
        try:
            receipt = send_with_retries(
                binding.server, token(), claimed.envelope, backoff=backoff, transport=transport
            )
        except UploadFailed as exc:
            if exc.retryable:
                spool.release(claimed)
                done.left = len(mine) - position
                return done
            done.rejected.append(str(spool.reject(claimed, str(exc))))
            continue
        except BaseException:
            spool.release(claimed)
            raise
        done.receipts.append(receipt)
        spool.done(claimed)
    return done


def deliver(
    server: str | Binding,
    token: Callable[[], str],
    envelope: RunEnvelope,
    *,
    spool: Spool,
    backoff: Backoff,
    transport: httpx.BaseTransport | None = None,
) -> Delivered:
    """Flush the spool's items for this server and repository, then send `envelope`; spool it
    if the service cannot take it now. A bare server URL binds to the envelope's repository."""
    binding = server if isinstance(server, Binding) else Binding(server, envelope.repository)
    flushed = flush(spool, binding, token, backoff=backoff, transport=transport)
    sent, rejected, notes = flushed.receipts, flushed.rejected, flushed.notes
    if flushed.left:  # the service is still unreachable: do not hammer it with this one too
        path = spool.put(binding, envelope)
        why = "the service still does not take the uploads spooled before this one"
        return Delivered(None, path, sent, flushed.left + 1, why, rejected, notes)
    try:
        receipt = send_with_retries(
            binding.server, token(), envelope, backoff=backoff, transport=transport
        )
    except UploadFailed as exc:
        if not exc.retryable:
            raise
        path = spool.put(binding, envelope)
        waiting = sum(binding.refuses(i.binding) is None for i in spool.pending())
        return Delivered(None, path, sent, waiting, str(exc), rejected, notes)
    return Delivered(receipt, None, sent, 0, "", rejected, notes)


def send_envelope(
    server: str,
    token: str,
    envelope: RunEnvelope,
    *,
    transport: httpx.BaseTransport | None = None,
    timeout_s: float = 60.0,
) -> dict[str, Any]:
    """POST the envelope; returns the service's receipt (stored or duplicate)."""
    body = envelope.model_dump_json(by_alias=True)
    url = server.rstrip("/") + UPLOAD_PATH
    try:
        with httpx.Client(transport=transport, timeout=timeout_s) as http:
            response = http.post(
                url,
                content=body,
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
    except httpx.HTTPError as exc:
        raise UploadFailed(f"no answer from {url} ({exc}): check --server / CPCI_SERVER") from exc
    if response.status_code in (200, 201):
        receipt: dict[str, Any] = response.json()
        return receipt
    try:
        detail = response.json().get("detail", response.text)
    except ValueError:
        detail = response.text[:500]
    raise UploadFailed(f"{url} answered {response.status_code}: {detail}", response.status_code)
