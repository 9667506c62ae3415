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

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from cpci.schema import RunEnvelope, UploadReceipt
from cpci.upload.errors import UploadFailed
from cpci.upload.retry import Backoff
from cpci.upload.service_client import ServiceClient
from cpci.upload.spool import Binding, Spool, Spooled

__all__ = [
    "Backoff",
    "Delivered",
    "Flushed",
    "UploadFailed",
    "deliver",
    "flush",
    "send_with_retries",
]


@dataclass
class Delivered:
    """What one `deliver` did: this upload's receipt (None when spooled) and the spool's state."""

    receipt: UploadReceipt | None
    spooled: Path | None = None
    flushed: list[UploadReceipt] = field(default_factory=list)
    still_spooled: int = 0
    error: str = ""
    rejected: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Flushed:
    """What a flush did: receipts, items of this binding still waiting (the server is still
    unreachable), items refused for good (set aside), and one-line notes (items bound elsewhere
    left in place, unreadable files set aside, files that could not be claimed or moved)."""

    receipts: list[UploadReceipt] = field(default_factory=list)
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
) -> UploadReceipt:
    """POST the envelope, retried as `backoff` says; returns the service's receipt."""
    client = ServiceClient(server, token, retry=backoff, transport=transport)
    return client.upload(envelope)


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
    done = Flushed(notes=list(scan.notes))
    mine = []
    for item in scan.items:
        why = binding.refuses(item.binding)
        if why is None:
            mine.append(item)
        else:
            done.notes.append(f"left {item.path.name} in the spool: {why}")
    for position, item in enumerate(mine):
        try:
            claimed = spool.claim(item)
        except OSError as exc:
            done.notes.append(f"left {item.path.name} in the spool: it cannot be claimed ({exc})")
            continue
        if claimed is None:
            continue  # a concurrent flush is sending it
        try:
            receipt = send_with_retries(
                binding.server, token(), claimed.envelope, backoff=backoff, transport=transport
            )
        except UploadFailed as exc:
            if exc.retryable:
                _put_back(spool, claimed, done)
                done.left = len(mine) - position
                return done
            done.rejected.append(spool.reject(claimed, str(exc)))
            continue
        except BaseException:
            _put_back(spool, claimed, done)
            raise
        done.receipts.append(receipt)
        try:
            spool.done(claimed)
        except OSError as exc:
            done.notes.append(
                f"sent {claimed.path.name} but cannot remove it ({exc}): a later flush sends it "
                "again, which the service answers `duplicate`"
            )
    return done


def _put_back(spool: Spool, claimed: Spooled, done: Flushed) -> None:
    try:
        spool.release(claimed)
    except OSError as exc:
        done.notes.append(
            f"cannot put {claimed.path.name} back ({exc}): the first flush after this process "
            "ends takes it"
        )


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
    if the service cannot take it now. A bare server URL binds to the envelope's repository.

    No file of the spool makes it raise (`flush` notes them); it raises only for this upload:
    a refusal a retry cannot fix (`UploadFailed`), a credential it cannot get
    (`CredentialsError`), or a spool that cannot hold it (`SpoolError`)."""
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
