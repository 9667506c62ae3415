"""An upload the service refused for good, kept beside the results so that nothing is lost.

A refusal no retry can fix (401, 403, 409, 413, 422) is neither retried nor spooled: the spool
waits for a service that is down, and the same body sent again gets the same answer. The same
goes for an upload that could not get a credential (an OIDC token that expired while a long suite
ran and could not be renewed). So the upload is written next to the results file
(`RESULTS.unsent.json`, which the Action keeps as an artifact with the results) with the
service's answer and a line saying which run, attempt, shard and leg it was. A person reads why,
fixes the cause (a leg for a second environment of one shard, a token of the right scope, a new
attempt) and sends it again with `cpci upload --resend FILE`, which removes the file once the
service has it.
"""

from __future__ import annotations

import contextlib
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cpci.schema import RunEnvelope
from cpci.upload.errors import EnvelopeError

#: Appended to the results file's name.
SUFFIX = ".unsent.json"


class UnsentUpload(BaseModel):
    """The refused upload: the whole envelope, and why the service did not store it."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    schema_: Literal["cpci.unsent/1"] = Field(default="cpci.unsent/1", alias="schema")
    upload: str = Field(description="which run, attempt, shard and leg, in one line")
    server: str
    status: int = Field(description="the service's HTTP status (0: it was never sent)")
    answer: str = Field(description="what the service said, with its URL, or why it was not sent")
    refused_at: datetime
    envelope: RunEnvelope


def unsent_path(results: str | Path) -> Path:
    """Where the refused upload of `results` is kept."""
    return Path(f"{results}{SUFFIX}")


def describe(envelope: RunEnvelope) -> str:
    """`run 555 attempt 1, shard 0/2 on leg a100 of acme/attn at 0123456789ab (PR #7)`."""
    leg = f" on leg {envelope.leg}" if envelope.leg else ""
    pull = f" (PR #{envelope.pull_request})" if envelope.pull_request else ""
    return (
        f"run {envelope.ci_run_id} attempt {envelope.ci_attempt}, shard {envelope.shard_index}/"
        f"{envelope.shard_total}{leg} of {envelope.repository} at {envelope.commit[:12]}{pull}"
    )


def keep_unsent(path: Path, server: str, envelope: RunEnvelope, *, status: int, answer: str) -> str:
    """Write the upload to `path` (atomically: a reader never sees half of it) with the
    service's answer (status 0: it was never sent); returns the sentence that tells the user
    where it is and how to send it again."""
    kept = UnsentUpload(
        upload=describe(envelope),
        server=server,
        status=status,
        answer=answer,
        refused_at=datetime.now(timezone.utc),
        envelope=envelope,
    )
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(kept.model_dump_json(by_alias=True, indent=1), encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        return (
            f"it could not be kept in {path} ({exc.strerror or exc}); the results file still "
            "has its results"
        )
    return (
        f"it is kept in {path} with the service's answer: fix what the answer says, then send "
        f"it again with `cpci upload --resend {path}`"
    )


def read_unsent(path: Path) -> UnsentUpload:
    """A kept upload, to send again; a file that is not one is an `EnvelopeError` naming it."""
    try:
        return UnsentUpload.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise EnvelopeError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'file'}: {e['msg']}" for e in exc.errors()[:3]
        )
        raise EnvelopeError(
            f"{path} is not an upload cpci kept (cpci.unsent/1): {problems}"
        ) from None
