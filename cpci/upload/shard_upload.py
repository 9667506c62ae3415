"""One shard's upload as `cpci upload` and the Action both make it: send (flushing the spool
first, spooling when the service is down), then the branch's commit ancestry.

Both callers describe the run their own way (flags, or the Action's inputs) and print the outcome
their own way; the steps in between are this one function, so the two cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cpci.schema import RunEnvelope
from cpci.upload.ancestry import record_ancestry
from cpci.upload.errors import CredentialsError
from cpci.upload.retry import Backoff
from cpci.upload.send import Delivered, deliver
from cpci.upload.settings import UploadSettings
from cpci.upload.spool import Binding, Spool


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
) -> ShardUpload:
    """Deliver `envelope` for this job (see `Binding.for_job`) and, once the service has it, send
    the checkout's first-parent history, which is a help and never fails the upload."""
    server = settings.require_server()
    token = settings.token_source(environ)
    binding = Binding.for_job(server, envelope.repository, environ)
    delivered = deliver(binding, token, envelope, spool=Spool(settings.spool), backoff=backoff)
    if delivered.receipt is None:
        return ShardUpload(delivered)
    try:
        note = record_ancestry(server, token(), envelope, cwd=cwd)
    except CredentialsError as exc:
        note = f"commit ancestry not recorded: {exc}"
    return ShardUpload(delivered, note)
