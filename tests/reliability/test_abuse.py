"""Abuse: forged or misdirected credentials, forged or replayed webhooks, oversized and deeply
nested bodies, and a corpus of hostile test names and messages through the PR comment, the check
run and every UI page. Each gets a clear refusal (with nothing written) or is rendered inert.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import jwt
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import Engine, func
from sqlmodel import Session, select

from cpci.github.comment import MARKER, CommentOptions, gate_recorded_in, render
from cpci.github.publish import check_run_fields
from cpci.github.webhooks import sign
from cpci.schema import PullRequestReport
from cpci.server import Settings, create_app
from cpci.server.core.db import create_db_engine
from cpci.server.core.migrate import upgrade
from cpci.server.crud.tokens import create_token
from cpci.server.models import Config, Repository, Result, Run, Shard, WebhookDelivery
from tests.builders import REPO, send
from tests.reliability.service import make_envelope, prepare_database
from tests.server.databases import ENGINES, fresh_database
from tests.server.oidc_keys import AUDIENCE, ISSUER, Keys, jwks_server

OTHER = "other/repo"
SECRET = "webhook-secret"
LIMIT = 64 * 1024


# --- the service under attack -----------------------------------------------------------


@dataclass
class Target:
    client: TestClient
    engine: Engine
    tokens: dict[str, str]
    keys: Keys

    def counts(self) -> dict[str, int]:
        with Session(self.engine) as session:
            return {
                table.__name__: session.exec(select(func.count()).select_from(table)).one()
                for table in (Repository, Run, Shard, Result, Config, WebhookDelivery)
            }


@pytest.fixture(scope="module")
def keys() -> Keys:
    return Keys()


@pytest.fixture(scope="module")
def jwks_url(keys: Keys) -> Iterator[str]:
    with jwks_server(keys) as url:
        yield url


def make_target(tmp: Path, keys: Keys, jwks_url: str, http: httpx.Client, **settings: Any) -> Any:
    url = f"sqlite:///{tmp / 'abuse.db'}"
    engine = create_db_engine(url)
    upgrade(engine)
    with Session(engine) as session:
        tokens = {r: create_token(session=session, repository=r).token for r in (REPO, OTHER)}
        session.commit()
    app = create_app(
        Settings(
            database_url=url,
            oidc_audience=AUDIENCE,
            oidc_issuer=ISSUER,
            oidc_jwks_url=jwks_url,
            oidc_allowed_repositories=(REPO, OTHER),
            github_webhook_secret=SecretStr(SECRET),
            max_upload_bytes=LIMIT,
            **settings,
        ),
        engine=engine,
        oidc_http=http,
    )
    return app, engine, tokens


@pytest.fixture
def target(tmp_path: Path, keys: Keys, jwks_url: str) -> Iterator[Target]:
    with httpx.Client() as http:
        app, engine, tokens = make_target(tmp_path, keys, jwks_url, http)
        with TestClient(app, raise_server_exceptions=False) as client:
            yield Target(client, engine, tokens, keys)
    engine.dispose()


def body(repository: str = REPO, run: str = "1", results: int = 2) -> dict[str, Any]:
    return make_envelope(run, 0, 1, results, repository=repository).model_dump(
        mode="json", by_alias=True
    )


# --- credentials ------------------------------------------------------------------------

ALG_NONE = (
    "eyJhbGciOiJub25lIiwidHlwIjoiSldUIiwia2lkIjoiazEifQ."
    + jwt.utils.base64url_encode(
        json.dumps({"repository": REPO, "aud": AUDIENCE}).encode()
    ).decode()
    + "."
)


def hs256_confusion(keys: Keys) -> str:
    """The algorithm-confusion attack: an HS256 token whose HMAC key is the public RSA key."""

    def b64(data: bytes) -> str:
        return jwt.utils.base64url_encode(data).decode()

    header = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
    payload = b64(json.dumps(keys.claims()).encode())
    mac = hmac.new(keys.public_pem(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64(mac)}"


CREDENTIALS: dict[str, tuple[Any, int]] = {
    "no token": (lambda t: None, 401),
    "empty bearer": (lambda t: "Bearer ", 401),
    "basic auth": (lambda t: "Basic dXNlcjpwYXNz", 401),
    "unknown upload token": (lambda t: "Bearer cpci_" + "A" * 43, 401),
    "token with a suffix": (lambda t: f"Bearer {t.tokens[REPO]}x", 401),
    "another repository's token": (lambda t: f"Bearer {t.tokens[OTHER]}", 403),
    "oidc for another repository": (lambda t: f"Bearer {t.keys.token(repository=OTHER)}", 403),
    "oidc expired": (lambda t: f"Bearer {t.keys.token(exp=int(time.time()) - 600)}", 401),
    "oidc wrongly signed": (lambda t: f"Bearer {t.keys.token(key=t.keys.evil)}", 401),
    "oidc other audience": (lambda t: f"Bearer {t.keys.token(aud='someone-else')}", 401),
    "oidc other issuer": (lambda t: f"Bearer {t.keys.token(iss='https://evil.example')}", 401),
    "oidc alg none": (lambda t: f"Bearer {ALG_NONE}", 401),
    "oidc HS256 keyed with the public key": (lambda t: f"Bearer {hs256_confusion(t.keys)}", 401),
    "oidc not yet valid": (lambda t: f"Bearer {t.keys.token(nbf=int(time.time()) + 3600)}", 401),
}


@pytest.mark.parametrize("case", list(CREDENTIALS))
def test_uploads_with_bad_credentials_are_refused_and_write_nothing(
    target: Target, case: str
) -> None:
    make, status = CREDENTIALS[case]
    header = make(target)
    headers = {"Authorization": header} if header is not None else {}
    before = target.counts()
    response = send(target.client, body(), headers=headers)
    assert response.status_code == status, response.text
    assert response.json()["code"] in ("unauthorized", "forbidden")
    assert response.json()["detail"]  # says why, and what to do
    assert target.counts() == before
    # the same credential on the other write endpoint
    response = target.client.post(
        f"/api/v1/repos/{REPO}/commits",
        json={"parents": [{"commit": "a" * 40, "parent": "b" * 40}]},
        headers=headers,
    )
    assert response.status_code == status
    assert target.counts() == before


def test_a_valid_oidc_token_still_uploads(target: Target) -> None:
    """The refusals above are not refusing everything."""
    sent = body()
    bearer = target.keys.token(sha=sent["commit"], run_id=sent["ci_run_id"])
    headers = {"Authorization": f"Bearer {bearer}"}
    assert send(target.client, sent, headers=headers).status_code == 201
    assert target.counts()["Result"] == 2


def test_token_reads_refuse_strangers_on_the_api_and_every_ui_page(
    tmp_path: Path, keys: Keys, jwks_url: str
) -> None:
    with httpx.Client() as http:
        app, engine, tokens = make_target(tmp_path, keys, jwks_url, http, read_access="token")
        with TestClient(app, raise_server_exceptions=False) as client:
            own = {"Authorization": f"Bearer {tokens[REPO]}"}
            up = send(client, body(), headers=own)
            assert up.status_code == 201
            key = quote("tests/test_cp.py::test_attn[1-s0-c0]@2")
            paths = [
                f"/api/v1/repos/{REPO}/runs/1",
                f"/api/v1/repos/{REPO}/history?config={key}",
                f"/api/v1/repos/{REPO}/flaky",
                f"/api/v1/repos/{REPO}/dashboard",
                f"/api/v1/repos/{REPO}/config?config={key}",
                f"/api/v1/repos/{REPO}/runs/1/detail",
                f"/ui/{REPO}",
                f"/ui/{REPO}/runs/1",
                f"/ui/{REPO}/config?config={key}",
            ]
            for path in paths:
                assert client.get(path, headers=own).status_code == 200, path
                assert client.get(path).status_code == 401, path
                stranger = {"Authorization": f"Bearer {tokens[OTHER]}"}
                assert client.get(path, headers=stranger).status_code == 403, path
                forged = {"Authorization": f"Bearer {keys.token(key=keys.evil)}"}
                assert client.get(path, headers=forged).status_code == 401, path
    engine.dispose()


# --- webhooks ---------------------------------------------------------------------------

PING = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode()


def deliver(target: Target, payload: bytes, delivery: str, signature: str | None) -> Any:
    headers = {
        "X-GitHub-Event": "ping",
        "X-GitHub-Delivery": delivery,
        "Content-Type": "application/json",
    }
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    return target.client.post("/github/webhook", content=payload, headers=headers)


@pytest.mark.parametrize(
    "signature",
    [
        None,
        "",
        "sha256=",
        "sha256=" + "0" * 64,
        sign("not-the-secret", PING),
        sign(SECRET, PING + b" "),  # signed for another body
        sign(SECRET, PING).replace("sha256=", "sha1="),
        sign(SECRET, PING).upper(),
    ],
    ids=["missing", "empty", "no-digest", "zeros", "other-secret", "other-body", "sha1", "upper"],
)
def test_webhooks_with_bad_signatures_are_401_and_store_nothing(
    target: Target, signature: str | None
) -> None:
    response = deliver(target, PING, "d-1", signature)
    assert response.status_code == 401
    assert "X-Hub-Signature-256" in response.json()["detail"]
    assert target.counts()["WebhookDelivery"] == 0


def test_a_replayed_delivery_id_is_acted_on_once(target: Target) -> None:
    first = deliver(target, PING, "d-replay", sign(SECRET, PING))
    assert first.status_code == 202
    again = deliver(target, PING, "d-replay", sign(SECRET, PING))
    assert again.status_code == 200
    assert again.json()["status"] == "duplicate"
    other = json.dumps({"zen": "replayed with another body"}).encode()
    assert deliver(target, other, "d-replay", sign(SECRET, other)).json()["status"] == "duplicate"
    assert target.counts()["WebhookDelivery"] == 1


# --- oversized, deeply nested, malformed --------------------------------------------------


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_oversized_uploads_are_413_whether_declared_or_streamed(target: Target) -> None:
    big = json.dumps(body(results=2000)).encode()
    assert len(big) > LIMIT
    headers = {"Authorization": f"Bearer {target.tokens[REPO]}", "Content-Type": "application/json"}
    declared = target.client.post("/api/v1/uploads", content=big, headers=headers)
    assert declared.status_code == 413
    assert "CPCI_MAX_UPLOAD_BYTES" in declared.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit must hold while streaming
        for i in range(0, len(big), 4096):
            yield big[i : i + 4096]

    streamed = target.client.post("/api/v1/uploads", content=chunks(), headers=headers)
    assert streamed.status_code == 413
    assert target.counts()["Result"] == 0


@pytest.mark.parametrize(
    "raw",
    [
        b'{"results": ' + nested(500) + b"}",
        b"\xff\xfe{not json",
        json.dumps(body()).encode().replace(b"1-s0-c0", b"\xc3\x28bad-utf8"),
        b"",
        b"null",
        b'"a string"',
        b"1e999999",
    ],
    ids=[
        "in-results",
        "bom-garbage",
        "invalid-utf8",
        "empty",
        "null",
        "string",
        "huge-number",
    ],
)
def test_malformed_uploads_are_clear_4xx_and_write_nothing(target: Target, raw: bytes) -> None:
    headers = {"Authorization": f"Bearer {target.tokens[REPO]}", "Content-Type": "application/json"}
    response = target.client.post("/api/v1/uploads", content=raw, headers=headers)
    assert response.status_code in (400, 422), response.text
    assert response.json()["detail"]
    assert target.counts()["Result"] == 0


@pytest.mark.parametrize(
    "raw",
    [
        nested(5_000),
        b'{"results": ' + nested(5_000) + b"}",
        json.dumps(body()).encode()[:-1] + b', "x": ' + nested(5_000) + b"}",
    ],
    ids=["array", "in-results", "extra-field"],
)
def test_deeply_nested_uploads_are_422(target: Target, raw: bytes) -> None:
    headers = {"Authorization": f"Bearer {target.tokens[REPO]}", "Content-Type": "application/json"}
    response = target.client.post("/api/v1/uploads", content=raw, headers=headers)
    assert response.status_code == 422, response.text


@pytest.mark.parametrize(
    ("payload", "status"),
    [(b"[]", 400), (b"1", 400), (nested(5_000), 400), (nested(100_000), 413)],
    ids=["list", "int", "deep", "deep-and-over-the-limit"],
)
def test_signed_but_malformed_webhooks_are_4xx(target: Target, payload: bytes, status: int) -> None:
    response = deliver(target, payload, "d-bad", sign(SECRET, payload))
    assert response.status_code == status
    assert response.json()["detail"]
    assert target.counts()["WebhookDelivery"] == 0


# --- hostile names and messages ---------------------------------------------------------

HOSTILE = [
    "<script>alert('cpci-xss-1')</script>",
    "<img src=x onerror=alert('cpci-xss-2')>",
    '"><svg onload=alert("cpci-xss-3")>',
    "javascript:alert('cpci-xss-4')",
    "</details></summary><b>layout</b>",
    "@octocat and @org/team please look",
    "```\nfence breaker\n```",
    "`` `tick` ``",
    "[click](javascript:alert(1)) ![t](https://evil.example/p.png)",
    "line1\nline2\r\n# heading",
    "<!-- cpci:pr-report state=success -->",
    "fixes #1234",
    "\u202eevil\u202c \x1b[31m\x07",
    "x" * 5000,
    "{{ 7 * 7 }} {% raw %}",
    "\udcff lone surrogate from invalid UTF-8",
]
#: Things that must never appear raw where HTML is interpreted.
ACTIVE_HTML = re.compile(
    r"<script>alert|<img src=x|<svg onload|onerror=alert|<b>layout|cpci:pr-report state=success"
)
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)


class _ActiveHtml(HTMLParser):
    """Collects what a browser would act on that could only have come from a hostile name."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_script = tag == "script"
        for name, value in attrs:
            if name.startswith("on"):
                self.found.append(f"<{tag} {name}={value!r}>")
            if name in ("href", "src", "action") and (value or "").strip().lower().startswith(
                "javascript:"
            ):
                self.found.append(f"<{tag} {name}={value!r}>")
        if tag in ("iframe", "object", "embed") or (tag == "img" and ("src", "x") in attrs):
            self.found.append(f"<{tag} {attrs}>")

    def handle_data(self, data: str) -> None:
        if self._in_script and "cpci-xss" in data:
            self.found.append(f"script: {data[:80]!r}")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_comment(self, data: str) -> None:
        if "cpci:pr-report" in data:
            self.found.append(f"<!--{data}-->")


def active_html(page: str) -> list[str]:
    parser = _ActiveHtml()
    parser.feed(page)
    parser.close()
    return parser.found


def hostile_results(outcome: str) -> list[dict[str, Any]]:
    out = []
    for i, text in enumerate(HOSTILE):
        safe = text.encode("utf-8", "replace").decode()  # a lone surrogate is not storable text
        out.append(
            {
                "nodeid": f"tests/test_h.py::test_h[{i}-{safe[:300]}]",
                "world_size": 2,
                "outcome": outcome,
                "duration_s": 1.0,
                "rank_errors": [
                    {"rank": 0, "phase": "call", "message": safe[:2000], "detail": safe}
                ]
                if outcome == "failed"
                else [],
            }
        )
    return out


@pytest.fixture
def hostile(target: Target) -> PullRequestReport:
    """A PR whose head fails every hostile config its base passed."""
    auth = {"Authorization": f"Bearer {target.tokens[REPO]}"}
    base, head = "a" * 40, "b" * 40
    for commit, run, outcome, extra in (
        (base, "base", "passed", {"branch": "main"}),
        (head, "head", "failed", {"branch": "feature", "pull_request": 9, "base_commit": base}),
    ):
        envelope = {
            "repository": REPO,
            "commit": commit,
            "ci_run_id": run,
            "results": hostile_results(outcome),
            **extra,
        }
        response = send(target.client, envelope, headers=auth)
        assert response.status_code == 201, response.text
    report = target.client.get(f"/api/v1/repos/{REPO}/pulls/9/report")
    assert report.status_code == 200
    parsed = PullRequestReport.model_validate(report.json())
    assert len(parsed.new_failures) == len(HOSTILE)
    return parsed


def test_hostile_names_are_inert_in_the_comment(hostile: PullRequestReport) -> None:
    body = render(hostile, None, CommentOptions(service_url="https://cpci.example.com"))
    outside = CODE_SPAN.sub("", body)
    assert body.startswith(MARKER)
    assert outside.count("cpci:pr-report") == 1, "the forged marker stays inside code"
    assert gate_recorded_in(body) == "failure"
    assert not ACTIVE_HTML.search(outside)
    assert not re.search(r"@(octocat|org)", outside)
    assert "](javascript:" not in outside
    assert "](https://evil" not in outside
    assert outside.count("<details") == outside.count("</details>")
    assert "\u202e" not in body
    assert "\x1b" not in body
    assert not any(line.startswith(("# heading", "```\nfence")) for line in body.splitlines())
    assert max(len(line) for line in body.splitlines()) < 2000


def test_hostile_names_are_inert_in_the_check_run(hostile: PullRequestReport) -> None:
    fields = check_run_fields(hostile, None, head_sha="b" * 40)
    assert fields["conclusion"] == "failure"
    summary = CODE_SPAN.sub("", fields["output"]["summary"])
    assert not ACTIVE_HTML.search(summary)
    assert not re.search(r"@(octocat|org)", summary)
    text = fields["output"]["text"]
    fence = re.fullmatch(r"(`{3,})json\n(.*)\n\1\n?", text, re.S)
    assert fence, "the text is one fenced JSON block, whatever the names hold"
    assert "\n" not in fence.group(2), "one line of JSON: no line can close the fence"
    report = json.loads(fence.group(2))["report"]
    assert report["counts"]["by_verdict"]["new_failure"] == len(HOSTILE)


def test_hostile_names_are_escaped_on_every_ui_page(
    target: Target, hostile: PullRequestReport
) -> None:
    pages = [
        "/ui/",
        f"/ui/{REPO}",
        f"/ui/{REPO}/runs/head",
        f"/ui/{REPO}/runs/base",
        f"/ui/{REPO}/pulls/9",
        f"/ui/{REPO}?branch=feature",
    ]
    pages += [f"/ui/{REPO}/config?config={quote(v.config)}" for v in hostile.new_failures]
    for path in pages:
        response = target.client.get(path)
        assert response.status_code == 200, path
        assert response.headers["content-type"].startswith("text/html")
        assert active_html(response.text) == [], path
    run_page = target.client.get(f"/ui/{REPO}/runs/head?outcome=failed").text
    assert "&lt;script&gt;alert(" in run_page, "the hostile names are shown, as text"


def post_to_fresh_service(
    request: pytest.FixtureRequest, directory: Path, engine_kind: str, raw: str
) -> Any:
    url = fresh_database(engine_kind, request, directory, migrated=False)
    token = prepare_database(url)
    engine = create_db_engine(url)
    app = create_app(Settings(database_url=url), engine=engine)
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.post(
            "/api/v1/uploads",
            content=raw,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
    engine.dispose()
    return response


@pytest.mark.parametrize("engine_kind", ENGINES)
def test_a_nul_character_in_a_name_is_refused_or_stored_not_a_500(
    request: pytest.FixtureRequest, tmp_path: Path, engine_kind: str
) -> None:
    raw = json.dumps(body()).replace("1-s0-c0", "nul\\u0000-inside")
    response = post_to_fresh_service(request, tmp_path, engine_kind, raw)
    assert response.status_code in (201, 422), response.text


@pytest.mark.parametrize("engine_kind", ENGINES)
def test_a_lone_surrogate_in_a_name_is_refused_or_stored_not_a_500(
    request: pytest.FixtureRequest, tmp_path: Path, engine_kind: str
) -> None:
    """JSON may carry `\\udcff` (what invalid UTF-8 becomes); no database can store it."""
    raw = json.dumps(body()).replace("1-s0-c0", "\\udcff-surrogate")
    response = post_to_fresh_service(request, tmp_path, engine_kind, raw)
    assert response.status_code in (201, 422), response.text


def test_an_absurd_shard_total_cannot_blow_up_the_pages(target: Target) -> None:
    """Every read lists a run's missing shards: the count is bounded at the door."""
    auth = {"Authorization": f"Bearer {target.tokens[REPO]}"}
    envelope = {**body(), "shard_total": 10**6}
    response = send(target.client, envelope, headers=auth)
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["path"] == "shard_total"
    most = {**body(), "shard_total": 10_000, "ci_run_id": "most-shards"}
    response = send(target.client, most, headers=auth)
    assert response.status_code == 201, response.text
    assert len(response.content) < 100_000, "the receipt lists every missing shard"
    dashboard = target.client.get(f"/api/v1/repos/{REPO}/dashboard")
    assert len(dashboard.content) < 100_000
