"""Reading an upload body: size limit first, then JSON and the shared schema, with errors that
name the field (422), the supported versions (400) or the limit (413)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from pydantic import ValidationError

from cpci.schema import RESULT_SCHEMA, SUPPORTED_RUN_SCHEMAS, RunEnvelope
from cpci.server.core.errors import InvalidPayload, PayloadTooLarge, UnsupportedSchema


async def read_limited(request: Request, limit: int) -> bytes:
    """The request body, refusing (413) anything over `limit` bytes without buffering it all."""
    too_large = PayloadTooLarge(
        f"the upload is larger than the server's limit of {limit} bytes "
        "(CPCI_MAX_UPLOAD_BYTES): split the results over more shards or raise the limit"
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise too_large
    return bytes(body)


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


def _check_versions(raw: bytes) -> None:
    """Turn an unknown schema version into a 400 that names what this server reads."""
    try:
        data: Any = json.loads(raw)
    except ValueError:
        return  # the validation error already says the body is not JSON
    except RecursionError:
        raise InvalidPayload(
            [
                {
                    "loc": [],
                    "msg": "the JSON nests too deeply to be a cpci.run/1 upload",
                    "type": "json_too_deep",
                }
            ]
        ) from None
    if not isinstance(data, dict):
        return
    schema = data.get("schema", SUPPORTED_RUN_SCHEMAS[0])
    if schema not in SUPPORTED_RUN_SCHEMAS:
        raise UnsupportedSchema(
            f"unsupported upload schema {schema!r}: this server reads "
            f"{', '.join(SUPPORTED_RUN_SCHEMAS)}; upgrade the server or use a matching uploader"
        )
    results = data.get("results")
    for index, record in enumerate(results if isinstance(results, list) else []):
        version = record.get("schema", RESULT_SCHEMA) if isinstance(record, dict) else None
        if version is not None and version != RESULT_SCHEMA:
            raise UnsupportedSchema(
                f"results[{index}].schema is {version!r}: this server reads {RESULT_SCHEMA}"
            )
