"""The bounds every wire record shares, and the base model they are built on.

The service stores these records in 32-bit integer and bounded text columns (SQLite and
PostgreSQL alike), so the bounds are checked where a record is built, by the runner, the
uploader or the service, rather than found out as a database error after the upload.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

JSONScalar = str | int | float | bool | None
#: A metric's name is 1 to this many characters, without NUL (the service interns it in a text
#: column, which PostgreSQL's cannot hold); the runner refuses a bad one where a test records it
#: (`cpci.runner.rank.dist`), so one name costs its config, not its world's records.
MAX_METRIC_NAME_LENGTH = 200
MetricName = Annotated[
    str, Field(min_length=1, max_length=MAX_METRIC_NAME_LENGTH, pattern=r"^[^\x00]*$")
]
#: NaN and infinities are refused at the door: they break comparisons, drift analysis and
#: PostgreSQL's JSON columns alike.
Finite = Annotated[float, Field(allow_inf_nan=False)]
#: Counts and numbers are stored in 32-bit integer columns: anything larger is refused here.
INT32_MAX = 2**31 - 1
#: More shards than any CI matrix runs: every read lists the missing ones, so the count is bounded.
MAX_SHARDS = 10_000
#: A matrix leg's name (e.g. `a100,gpu,linux`): bounded like the column it is stored in.
MAX_LEG_LENGTH = 200
#: A git commit id: 7 to 64 lowercase hex digits (abbreviated, SHA-1 or SHA-256).
CommitSha = Annotated[str, Field(pattern=r"^[0-9a-f]{7,64}$")]
#: Stored identities must not hold NUL (PostgreSQL text cannot); messages are cleaned instead.
Identity = Annotated[str, Field(pattern=r"^[^\x00]*$")]
LegName = Annotated[str, Field(min_length=1, max_length=MAX_LEG_LENGTH, pattern=r"^[^\x00]*$")]


class WireModel(BaseModel):
    """An uploaded record: unknown fields are refused (a typo is an error, not a lost field)
    and a record never changes once built."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
