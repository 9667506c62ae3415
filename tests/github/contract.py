"""GitHub's published REST contract (the OpenAPI subset in shared/reference), as a validator.

The fake GitHub checks every request it gets and every response it gives with openapi-core, so
a client that drifts from GitHub's contract, or a fake that answers what GitHub never would,
fails the tests. Statuses an operation does not declare (a 403 secondary rate limit, a 503 on a
check run) are checked against GitHub's `basic-error` schema, which is what GitHub sends then.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
from pathlib import Path
from typing import Any

import httpx
from openapi_core import Config, OpenAPI
from openapi_core.datatypes import RequestParameters
from openapi_schema_validator import OAS30Validator
from werkzeug.datastructures import Headers, ImmutableMultiDict

from tests.prerequisites import missing


def reference_dir() -> Path | None:
    """shared/reference beside the repository (or $CPCI_REFERENCE_DIR), None where absent."""
    configured = os.environ.get("CPCI_REFERENCE_DIR")
    path = (
        Path(configured)
        if configured
        else Path(__file__).parents[2].parent / "shared" / "reference"
    )
    return path if path.is_dir() else None


def require_reference() -> Path:
    found = reference_dir()
    if found is None:
        missing("reference", "shared/reference (GitHub's contract, real payloads) is not here")
    return found


@functools.lru_cache(maxsize=1)
def _spec() -> dict[str, Any]:
    spec: dict[str, Any] = json.loads(
        (require_reference() / "github-rest-subset.json").read_text(encoding="utf-8")
    )
    spec = copy.deepcopy(spec)
    spec["servers"] = [{"url": "/"}]  # the fake listens on 127.0.0.1, not api.github.com
    # `checks/create` puts a discriminator on `status` with inline oneOf branches and no mapping;
    # OpenAPI then reads the value as a schema name (#/components/schemas/queued) that does not
    # exist. The oneOf alone states the same rule (completed needs a conclusion), so drop it.
    post = spec["paths"]["/repos/{owner}/{repo}/check-runs"]["post"]
    del post["requestBody"]["content"]["application/json"]["schema"]["discriminator"]
    _null_in_nullable_enums(spec)
    return spec


def _null_in_nullable_enums(node: Any) -> None:
    """`nullable: true` with an `enum` lacking null: the validator then refuses null, yet GitHub
    sends it (its own in-progress check-run example has `conclusion: null`). Allow null there."""
    if isinstance(node, dict):
        if node.get("nullable") is True and "enum" in node and None not in node["enum"]:
            node["enum"] = [*node["enum"], None]
        for value in node.values():
            _null_in_nullable_enums(value)
    elif isinstance(node, list):
        for value in node:
            _null_in_nullable_enums(value)


@functools.lru_cache(maxsize=1)
def _multi_segment_paths() -> list[tuple[re.Pattern[str], list[str]]]:
    """Each path template with `x-multi-segment` parameters (a file's path in
    repos/get-content, a ref in repos/get-commit: GitHub lets them hold `/`), as a regex in
    which those parameters span segments, with the parameters' names in order."""
    found = []
    for template, item in _spec()["paths"].items():
        params = [
            p
            for op in item.values()
            if isinstance(op, dict)
            for p in op.get("parameters", [])
            if p.get("x-multi-segment")
        ]
        multi = {p["name"] for p in params}
        if not multi:
            continue
        names = re.findall(r"{(\w+)}", template)
        pattern = re.escape(template)
        for name in names:
            part = "(.+)" if name in multi else "([^/]+)"
            pattern = pattern.replace(re.escape("{" + name + "}"), part, 1)
        found.append((re.compile(pattern), names))
    return found


def _one_segment(path: str) -> str:
    """The path with each multi-segment parameter's `/` quoted, so openapi-core (which matches
    a template parameter within one segment) finds the operation GitHub documents."""
    for pattern, names in _multi_segment_paths():
        match = pattern.fullmatch(path)
        if match is None:
            continue
        pieces, last = [], 0
        for index in range(1, len(names) + 1):
            pieces += [path[last : match.start(index)], match.group(index).replace("/", "%2F")]
            last = match.end(index)
        return "".join(pieces) + path[last:]
    return path


@functools.lru_cache(maxsize=1)
def _openapi() -> OpenAPI:
    # GitHub's object media type (repos/get-content) is JSON: read it as such.
    config = Config(extra_media_type_deserializers={"application/vnd.github.object": json.loads})
    return OpenAPI.from_dict(_spec(), config=config)


def webhook_schema(name: str) -> dict[str, Any]:
    """A webhook payload schema with the document's components, ready for OAS30Validator."""
    spec = _spec()
    return {**spec["components"]["schemas"][name], "components": spec["components"]}


def _basic_error_validator() -> OAS30Validator:
    spec = _spec()
    return OAS30Validator(
        {"$ref": "#/components/schemas/basic-error", **{"components": spec["components"]}}
    )


class _Request:
    def __init__(self, request: httpx.Request) -> None:
        self._request = request
        self.parameters = RequestParameters(
            query=ImmutableMultiDict(list(request.url.params.multi_items())),
            header=Headers(list(request.headers.items())),
            cookie=ImmutableMultiDict(),
        )

    @property
    def host_url(self) -> str:
        return f"{self._request.url.scheme}://{self._request.url.netloc.decode()}"

    @property
    def path(self) -> str:
        return _one_segment(self._request.url.path)

    @property
    def method(self) -> str:
        return self._request.method.lower()

    @property
    def body(self) -> bytes | None:
        return self._request.content or None

    @property
    def content_type(self) -> str:
        value: str = self._request.headers.get("content-type", "application/octet-stream")
        return value


class _Response:
    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.headers = Headers(list(response.headers.items()))

    @property
    def status_code(self) -> int:
        return self._response.status_code

    @property
    def content_type(self) -> str:
        value: str = self._response.headers.get("content-type", "application/json")
        return value

    @property
    def data(self) -> bytes:
        return self._response.content


def declared(method: str, template: str, status: int) -> bool:
    operation = _spec()["paths"][template][method.lower()]
    return str(status) in operation["responses"]


def validate_request(request: httpx.Request) -> None:
    """Raise where the request breaks the contract (path, query, headers, body)."""
    _openapi().validate_request(_Request(request))


def validate_response(request: httpx.Request, response: httpx.Response, template: str) -> None:
    """Raise where the response breaks the contract; undeclared errors must be basic-error."""
    if declared(request.method, template, response.status_code):
        _openapi().validate_response(_Request(request), _Response(response))
    else:
        _basic_error_validator().validate(response.json())
