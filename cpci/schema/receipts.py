"""What the service answers to an upload: one shard's receipt.

The service builds it after storing (or recognising) a shard, and the uploader, the Action and the
demo read it back to say what happened and where the run's page is. Unlike an uploaded record it
tolerates fields it does not know: an older uploader keeps reading a newer service's receipt.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from cpci.schema.runs import ShardProgress

#: `stored`: the shard is new and kept; `duplicate`: the same body was stored before (nothing new).
UploadStatus = Literal["stored", "duplicate"]


class UploadReceipt(BaseModel):
    """One shard's upload as the service took it, with the run's shard progress so far."""

    status: UploadStatus
    repository: str
    ci_run_id: str
    ci_attempt: int
    shard_index: int
    leg: str = ""
    results: int = Field(description="results the shard holds (a duplicate: as stored before)")
    shards: ShardProgress
    run_api_url: str = Field(description="the run's summary in the API (relative to the service)")
    run_url: str = Field(description="the run's page in the web UI (relative to the service)")
