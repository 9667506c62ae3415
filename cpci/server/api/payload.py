"""Parsing request bodies, with errors that name the field (422), the supported versions (400)
or the depth (422). Their size is bounded while they are read, by `api/body_limits.py`.

Every JSON body is parsed by pydantic-core's parser, which refuses nesting past
`JSON_MAX_DEPTH` levels where it meets it, in Rust: no body recurses in Python.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from cpci.schema import RESULT_SCHEMA, SUPPORTED_RUN_SCHEMAS, RunEnvelope
from cpci.server.core.errors import InvalidPayload, UnsupportedSchema

#: pydantic-core's recursion limit: JSON nested deeper is refused, wherever it is.
JSON_MAX_DEPTH = 200
#: Accepts only `null`: validating a body with it parses the body and builds nothing.
_PARSED_ONLY = TypeAdapter(None)


def parse_envelope(raw: bytes) -> RunEnvelope:
    """Validate with the schema module shared with the runner (the fast path parses once)."""
    try:
        envelope = RunEnvelope.model_validate_json(raw)
    except ValidationError as exc:
        _check_versions(raw)
        raise InvalidPayload([dict(e) for e in exc.errors()]) from exc
    if envelope.shard_index >= envelope.shard_total:
        raise InvalidPayload(
            [
                {
                    "loc": ["shard_index"],
                    "msg": f"shard_index {envelope.shard_index} must be below shard_total "
                    f"{envelope.shard_total}",
                    "type": "value_error",
                }
            ]
        )
    return envelope


def check_json_depth(raw: bytes) -> None:
    """InvalidPayload when `raw` nests deeper than JSON_MAX_DEPTH levels. Any other defect is
    left to the parsing that follows, which names it."""
    try:
        _PARSED_ONLY.validate_json(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        if any("recursion limit" in e["msg"] for e in errors):
            raise InvalidPayload(
                [
                    {
                        "loc": [],
                        "msg": f"the JSON nests deeper than {JSON_MAX_DEPTH} levels",
                        "type": "json_too_deep",
                    }
                ]
            ) from None


class _ResultVersion(BaseModel):
    schema_: object = Field(default=RESULT_SCHEMA, alias="schema")


class _UploadVersions(BaseModel):
    """An upload's version fields, read leniently: whatever else it holds is skipped unbuilt."""

    schema_: object = Field(default=SUPPORTED_RUN_SCHEMAS[0], alias="schema")
    results: list[_ResultVersion | object] | object = Field(default_factory=list)


def _check_versions(raw: bytes) -> None:
    """Turn an unknown schema version into a 400 that names what this server reads."""
    try:
        versions = _UploadVersions.model_validate_json(raw)
    except ValidationError:
        return  # not a JSON object (or too deep): the envelope's own errors say so
    if versions.schema_ not in SUPPORTED_RUN_SCHEMAS:
        raise UnsupportedSchema(
            f"unsupported upload schema {versions.schema_!r}: this server reads "
            f"{', '.join(SUPPORTED_RUN_SCHEMAS)}; upgrade the server or use a matching uploader"
        )
    results = versions.results if isinstance(versions.results, list) else []
    for index, record in enumerate(results):
        version = record.schema_ if isinstance(record, _ResultVersion) else None
        if version is not None and version != RESULT_SCHEMA:
            raise UnsupportedSchema(
                f"results[{index}].schema is {version!r}: this server reads {RESULT_SCHEMA}"
            )
