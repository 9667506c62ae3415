"""One shard's upload as `cpci upload` and the Action both make it: send (flushing the spool
first, spooling when the service is down, keeping a refused upload beside the results), then the
branch's commit ancestry.

Both callers describe the run their own way (flags, or the Action's inputs) and print the outcome
their own way; the steps in between are this one function, so the two cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cpci.schema import RunEnvelope
from cpci.upload.ancestry import record_ancestry
from cpci.upload.errors import CredentialsError, UploadFailed, UploadRefused
from cpci.upload.retry import Backoff
from cpci.upload.send import Delivered, deliver
from cpci.upload.settings import UploadSettings
from cpci.upload.spool import Binding, Spool
from cpci.upload.unsent import describe, keep_unsent


@dataclass(frozen=True)
class ShardUpload:
    """What happened: the delivery (receipt, or where it was spooled) and the ancestry note."""

    delivered: Delivered
    ancestry: str = ""


def upload_shard(
    settings: UploadSettings,
    envelope: RunEnvelope,
    environ: Mapping[str, str],
    *,
    backoff: Backoff,
    cwd: Path,
    keep: Path | None = None,
    token: Callable[[], str] | None = None,
) -> ShardUpload:
    """Deliver `envelope` for this job (see `Binding.for_job`) and, once the service has it, send
    the checkout's first-parent history, which is a help and never fails the upload.

    A refusal no retry can fix raises `UploadRefused`, and a credential that cannot be had a
    `CredentialsError`, after writing the upload to `keep` (see `cpci.upload.unsent`). `token`
    gives the bearer token (default: the settings' own source; the Action passes the one it
    got before the tests)."""
    server = settings.require_server()
    token = token or settings.token_source(environ)
    binding = Binding.for_job(server, envelope.repository, environ)
    try:
        delivered = deliver(binding, token, envelope, spool=Spool(settings.spool), backoff=backoff)
    except UploadFailed as exc:
        kept = _keep(keep, server, envelope, exc.status, str(exc))
        raise UploadRefused(
            f"the service refused {describe(envelope)}: {exc}. Nothing was stored; {kept}",
            exc.status,
        ) from exc
    except CredentialsError as exc:
        kept = _keep(keep, server, envelope, 0, f"not sent: {exc}")
        raise CredentialsError(f"{exc}. {describe(envelope)} was not sent; {kept}") from exc
    if delivered.receipt is None:
        return ShardUpload(delivered)
    try:
        note = record_ancestry(server, token(), envelope, cwd=cwd)
    except CredentialsError as exc:
        note = f"commit ancestry not recorded: {exc}"
    return ShardUpload(delivered, note)


def _keep(keep: Path | None, server: str, envelope: RunEnvelope, status: int, answer: str) -> str:
    if keep is None:
        return "it is not kept"
    return keep_unsent(keep, server, envelope, status=status, answer=answer)
