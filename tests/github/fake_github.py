"""A fake GitHub for the routes the bot uses, held to GitHub's published contract.

`FakeGitHub.handle` takes an `httpx.Request` and returns an `httpx.Response`: tests use it behind
`httpx.MockTransport`, or behind a real HTTP server on 127.0.0.1 (`serve()`). Every request is
validated against shared/reference/github-rest-subset.json before it is answered and every
answer after; bodies start from the contract's own examples. Four routes are outside that subset
(an installation token, a PR's reviews, `GET /app`, `GET /user`) and are checked by hand, as
GitHub documents them. A file's contents (repos/get-content) are served in the object media
type the client asks for, with the size of any file and its content up to GitHub's 1 MB. Who
added a label is an issue event (issues/list-events) and who may write a permission level
(repos/get-collaborator-permission-level): a login the fake was not told about has `read`, as
anyone has on a public repository.
"""

from __future__ import annotations

import base64
import copy
import difflib
import hashlib
import http.server
import itertools
import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import httpx
import jwt

from tests.github import contract
from tests.live_server import serve_handler

Handler = Callable[["FakeGitHub", httpx.Request, dict[str, str]], httpx.Response]
NOW = "2026-12-01T12:00:00Z"


@dataclass
class Fault:
    """An answer to give instead of the real one, `times` times, to matching requests."""

    method: str
    path: str  # a regex searched in the URL path
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    message: str = "Server Error"
    times: int = 1


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> httpx.Response:
    body = {"message": message, "documentation_url": "https://docs.github.com/rest"}
    return httpx.Response(status, json=body, headers=headers)


class FakeGitHub:
    """Stateful: pull requests, files, comments, check runs and statuses per repository."""

    def __init__(
        self, *, tokens: dict[str, str] | None = None, app_public_key: str | None = None
    ) -> None:
        self.tokens = dict(tokens or {"ghs_test": "cpci-bot[bot]"})  # token -> login
        self.app_public_key = app_public_key
        self.pulls: dict[tuple[str, int], dict[str, Any]] = {}
        self.files: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.comments: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.check_runs: dict[int, dict[str, Any]] = {}
        self.statuses: list[dict[str, Any]] = []
        self.dispatches: list[tuple[str, str, dict[str, Any]]] = []  # (repo, workflow, body)
        self.contents: dict[tuple[str, str, str], str] = {}  # (repo, path, ref) -> text
        self.merge_bases: dict[tuple[str, int], str] = {}
        self.reviews: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.events: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.permissions: dict[tuple[str, str], str] = {}  # (repo, login) -> admin/write/...
        self.faults: list[Fault] = []
        self.calls: list[tuple[str, str]] = []
        self.rate_limit_reset: int | None = None  # answer with a spent primary limit
        self._ids = itertools.count(1001)

    # -- arranging -------------------------------------------------------------------------

    def add_pull(
        self,
        repo: str,
        number: int,
        *,
        head_sha: str,
        base_sha: str,
        body: str = "",
        title: str | None = None,
        labels: tuple[str, ...] = (),
        files: Sequence[tuple[str, str] | tuple[str, str, str]] = (),
        head_repo: str | None = None,
        head_ref: str | None = None,
        base_ref: str | None = None,
        merge_base: str | None = None,
    ) -> None:
        """A PR; `files` as (status, name) or ("renamed", new, old); its head in `head_repo`
        (a fork; default `repo`) on `head_ref`, into `base_ref` (defaults: the example's, and
        its title). Its files' `patch` is their diff from `merge_base` (default `base_sha`:
        as on GitHub, `base.sha` is the base branch's tip, which may have moved on since)."""
        pull = copy.deepcopy(contract._spec()["components"]["examples"]["pull-request"]["value"])
        pull.update(number=number, body=body, requested_teams=[], state="open")
        pull.update(html_url=f"https://github.com/{repo}/pull/{number}")
        pull["title"] = title if title is not None else pull["title"]
        pull["labels"] = [{**pull["labels"][0], "name": name} for name in labels]
        pull["head"]["sha"], pull["base"]["sha"] = head_sha, base_sha
        pull["base"]["repo"]["full_name"] = repo
        pull["head"]["repo"] = {**pull["head"]["repo"], "full_name": head_repo or repo}
        pull["head"]["ref"] = head_ref or pull["head"]["ref"]
        pull["base"]["ref"] = base_ref or pull["base"]["ref"]
        self.pulls[(repo, number)] = pull
        self.files[(repo, number)] = [self._diff_entry(*entry) for entry in files]
        self.merge_bases[(repo, number)] = merge_base or base_sha

    def _diff_entry(self, status: str, name: str, old: str | None = None) -> dict[str, Any]:
        entry: dict[str, Any] = copy.deepcopy(
            contract._spec()["components"]["examples"]["diff-entry-items"]["value"][0]
        )
        entry.update(filename=name, status=status)
        if old is not None:
            entry["previous_filename"] = old
        return entry

    def add_comment(self, repo: str, number: int, body: str, login: str) -> dict[str, Any]:
        comment: dict[str, Any] = copy.deepcopy(
            contract._spec()["components"]["examples"]["issue-comment"]["value"]
        )
        comment_id = next(self._ids)
        comment.update(
            id=comment_id,
            body=body,
            html_url=f"https://github.com/{repo}/pull/{number}#issuecomment-{comment_id}",
        )
        comment["user"] = {**comment["user"], "login": login}
        self.comments.setdefault((repo, number), []).append(comment)
        return comment

    def add_review(
        self, repo: str, number: int, *, login: str, association: str, state: str, body: str
    ) -> None:
        """A submitted review, with the fields GitHub's review object carries that cpci reads."""
        review = {
            "id": next(self._ids),
            "user": {"login": login},
            "body": body,
            "state": state,
            "author_association": association,
            "commit_id": self.pulls[(repo, number)]["head"]["sha"],
            "submitted_at": NOW,
        }
        self.reviews.setdefault((repo, number), []).append(review)

    def label(self, repo: str, number: int, name: str, *, by: str) -> dict[str, Any]:
        """`by` adds the label `name` to the PR: on the PR, and as a `labeled` event; returns
        the label as a webhook carries it."""
        pull = self.pulls[(repo, number)]
        template = copy.deepcopy(
            contract._spec()["components"]["examples"]["pull-request"]["value"]["labels"][0]
        )
        label = {**template, "name": name}
        pull["labels"] = [*(x for x in pull["labels"] if x["name"] != name), label]
        self._event(repo, number, "labeled", by, {"name": name, "color": label["color"]})
        return label

    def unlabel(self, repo: str, number: int, name: str, *, by: str) -> None:
        pull = self.pulls[(repo, number)]
        pull["labels"] = [x for x in pull["labels"] if x["name"] != name]
        self._event(repo, number, "unlabeled", by, {"name": name, "color": "ededed"})

    def _event(self, repo: str, number: int, kind: str, actor: str, label: dict[str, str]) -> None:
        event = copy.deepcopy(
            contract._spec()["components"]["examples"]["issue-event-for-issue-items"]["value"][0]
        )
        event.update(id=next(self._ids), event=kind, label=label, created_at=NOW)
        event["actor"] = {**event["actor"], "login": actor}
        self.events.setdefault((repo, number), []).append(event)

    def grant(self, repo: str, login: str, permission: str) -> None:
        """`login`'s permission on `repo`: admin, write, read or none."""
        self.permissions[(repo, login)] = permission

    def fail(self, method: str, path: str, status: int, **kwargs: Any) -> None:
        self.faults.append(Fault(method, path, status, **kwargs))

    def writes(self) -> list[tuple[str, str]]:
        return [call for call in self.calls if call[0] in ("POST", "PATCH", "DELETE")]

    # -- serving ---------------------------------------------------------------------------

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.calls.append((request.method, request.url.path))
        template, handler, params = _route(request)
        if template is not None:
            contract.validate_request(request)
        response = (
            self._fault(request) or self._authorized(request) or handler(self, request, params)
        )
        response.read()
        if template is not None:
            contract.validate_response(request, response, template)
        return response

    def _fault(self, request: httpx.Request) -> httpx.Response | None:
        for fault in self.faults:
            if (
                fault.times > 0
                and fault.method == request.method
                and re.search(fault.path, request.url.path)
            ):
                fault.times -= 1
                return _error(fault.status, fault.message, fault.headers)
        return None

    def _authorized(self, request: httpx.Request) -> httpx.Response | None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if request.url.path == "/app" or request.url.path.startswith("/app/"):
            return None  # the app-token route checks its JWT itself
        if scheme != "Bearer" or token not in self.tokens:
            return _error(401, "Bad credentials")
        assert request.headers["x-github-api-version"] == "2022-11-28"
        return None

    def login_of(self, request: httpx.Request) -> str:
        return self.tokens[request.headers["authorization"].partition(" ")[2]]

    def json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
        headers = dict(headers or {})
        if self.rate_limit_reset is not None:
            headers |= {
                "x-ratelimit-remaining": "0",
                "x-ratelimit-reset": str(self.rate_limit_reset),
            }
        return httpx.Response(status, json=body, headers=headers)

    def page(self, request: httpx.Request, items: list[Any]) -> httpx.Response:
        per_page = int(request.url.params.get("per_page", 30))
        number = int(request.url.params.get("page", 1))
        chunk = items[(number - 1) * per_page : number * per_page]
        last = max(1, -(-len(items) // per_page))
        links = []
        base = f"{request.url.scheme}://{request.url.netloc.decode()}{request.url.path}"
        if number < last:
            links.append(f'<{base}?per_page={per_page}&page={number + 1}>; rel="next"')
            links.append(f'<{base}?per_page={per_page}&page={last}>; rel="last"')
        return self.json(200, chunk, {"Link": ", ".join(links)} if links else None)

    @contextmanager
    def serve(self) -> Iterator[str]:
        """Serve on a real loopback port; yields the base URL."""
        fake = self

        class _Handler(http.server.BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                request = httpx.Request(
                    self.command,
                    f"http://{self.headers['host']}{self.path}",
                    headers=list(self.headers.items()),
                    content=self.rfile.read(length),
                )
                response = fake.handle(request)
                self.send_response(response.status_code)
                for name, value in response.headers.items():
                    if name.lower() not in ("content-length", "transfer-encoding"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(response.content)))
                self.end_headers()
                self.wfile.write(response.content)

            do_GET = do_POST = do_PATCH = do_DELETE = _any

            def log_message(self, format: str, *args: Any) -> None:
                pass

        with serve_handler(_Handler) as url:
            yield url


# -- routes ------------------------------------------------------------------------------------


def _body(request: httpx.Request) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(request.content)
    return data


def _list_comments(fake: FakeGitHub, request: httpx.Request, p: dict[str, str]) -> httpx.Response:
    return fake.page(request, fake.comments.get((f"{p['owner']}/{p['repo']}", int(p["n"])), []))


def _create_comment(fake: FakeGitHub, request: httpx.Request, p: dict[str, str]) -> httpx.Response:
    repo, number = f"{p['owner']}/{p['repo']}", int(p["n"])
    body = _body(request)["body"]
    if len(body) > 65536:
        return _error(422, "Validation Failed: body is too long (maximum is 65536 characters)")
    return fake.json(201, fake.add_comment(repo, number, body, fake.login_of(request)))


def _update_comment(fake: FakeGitHub, request: httpx.Request, p: dict[str, str]) -> httpx.Response:
    repo = f"{p['owner']}/{p['repo']}"
    for (owner_repo, _), comments in fake.comments.items():
        for comment in comments:
            if owner_repo == repo and comment["id"] == int(p["id"]):
                if comment["user"]["login"] != fake.login_of(request):
                    return _error(403, "Resource not accessible by integration")
                comment["body"] = _body(request)["body"]
                return fake.json(200, comment)
    return _error(404, "Not Found")


def _get_pull(fake: FakeGitHub, request: httpx.Request, p: dict[str, str]) -> httpx.Response:
    pull = fake.pulls.get((f"{p['owner']}/{p['repo']}", int(p["n"])))
    return fake.json(200, pull) if pull else _error(404, "Not Found")


def _list_files(fake: FakeGitHub, request: httpx.Request, p: dict[str, str]) -> httpx.Response:
    repo, number = f"{p['owner']}/{p['repo']}", int(p["n"])
    head = fake.pulls[(repo, number)]["head"]["sha"]
    entries = []
    for entry in fake.files.get((repo, number), []):
        old = entry.get("previous_filename", entry["filename"])
        before = fake.contents.get((repo, old, fake.merge_bases[(repo, number)]))
        after = fake.contents.get((repo, entry["filename"], head))
        entry = {k: v for k, v in entry.items() if k != "patch"}  # what the fake cannot know
        if before is not None and after is not None:
            entry["patch"] = _hunks(before, after)
        entries.append(entry)
    return fake.page(request, entries)


def _hunks(before: str, after: str) -> str:
    """A file's diff as the file list's `patch` holds it: hunks only, no file headers."""
    lines = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="")
    return "\n".join(list(lines)[2:])


def _create_check(fake: FakeGitHub, request: httpx.Request, p: dict[str, str]) -> httpx.Response:
    check = copy.deepcopy(contract._spec()["components"]["examples"]["check-run"]["value"])
    fields = _body(request)
    check.update(id=next(fake._ids), name=fields["name"], head_sha=fields["head_sha"])
    _apply_check_fields(check, fields)
    fake.check_runs[check["id"]] = check
    return fake.json(201, check)


def _update_check(fake: FakeGitHub, request: httpx.Request, p: dict[str, str]) -> httpx.Response:
    check = fake.check_runs.get(int(p["id"]))
    if check is None:
        return _error(404, "Not Found")
    _apply_check_fields(check, _body(request))
    return fake.json(200, check)


def _apply_check_fields(check: dict[str, Any], fields: dict[str, Any]) -> None:
    check["status"] = fields.get(
        "status", "completed" if "conclusion" in fields else check["status"]
    )
    check["conclusion"] = fields.get("conclusion") if check["status"] == "completed" else None
    check["completed_at"] = NOW if check["status"] == "completed" else None
    if "output" in fields:
        check["output"] = {**check["output"], **fields["output"]}
        check["output"]["text"] = fields["output"].get("text")
    check["details_url"] = fields.get("details_url", check["details_url"])


def _create_status(fake: FakeGitHub, request: httpx.Request, p: dict[str, str]) -> httpx.Response:
    status = copy.deepcopy(contract._spec()["components"]["examples"]["status"]["value"])
    status.update(_body(request), id=next(fake._ids))
    fake.statuses.append({**status, "sha": p["sha"]})
    return fake.json(201, status)


def _list_reviews(fake: FakeGitHub, request: httpx.Request, p: dict[str, str]) -> httpx.Response:
    # Outside the subset: GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews, paginated.
    return fake.page(request, fake.reviews.get((f"{p['owner']}/{p['repo']}", int(p["n"])), []))


def _list_events(fake: FakeGitHub, request: httpx.Request, p: dict[str, str]) -> httpx.Response:
    return fake.page(request, fake.events.get((f"{p['owner']}/{p['repo']}", int(p["n"])), []))


def _permission(fake: FakeGitHub, request: httpx.Request, p: dict[str, str]) -> httpx.Response:
    example = "repository-collaborator-permission-response-if-user-has-admin-permissions"
    body = copy.deepcopy(contract._spec()["components"]["examples"][example]["value"])
    level = fake.permissions.get((f"{p['owner']}/{p['repo']}", p["username"]), "read")
    body.update(permission=level, role_name=level)
    # The schema's collaborator has a role_name too, which GitHub's own example leaves out.
    body["user"] = {**body["user"], "login": p["username"], "role_name": level}
    return fake.json(200, body)


#: GitHub's contents API sends a file's content up to this size; past it, `encoding` is "none".
CONTENT_LIMIT = 1_000_000


def _contents(fake: FakeGitHub, request: httpx.Request, p: dict[str, str]) -> httpx.Response:
    # repos/get-content for a file: the object media type (content-tree) or the default
    # (content-file), which for a file hold the same fields.
    repo, path, ref = f"{p['owner']}/{p['repo']}", unquote(p["path"]), request.url.params["ref"]
    text = fake.contents.get((repo, path, ref))
    if text is None:
        return _error(404, "Not Found")
    data = text.encode()
    body = copy.deepcopy(
        contract._spec()["components"]["examples"]["content-file-response-if-content-is-a-file"][
            "value"
        ]
    )
    sha = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    encoded = base64.encodebytes(data).decode() if len(data) <= CONTENT_LIMIT else ""
    api = f"https://api.github.com/repos/{repo}"
    body.update(
        name=path.rpartition("/")[2],
        path=path,
        size=len(data),
        sha=sha,
        content=encoded,
        encoding="base64" if len(data) <= CONTENT_LIMIT else "none",
        url=f"{api}/contents/{path}?ref={ref}",
        git_url=f"{api}/git/blobs/{sha}",
        html_url=f"https://github.com/{repo}/blob/{ref}/{path}",
        download_url=f"https://raw.githubusercontent.com/{repo}/{ref}/{path}",
    )
    body["_links"] = {"git": body["git_url"], "self": body["url"], "html": body["html_url"]}
    asked = request.headers.get("accept", "")
    kind = asked if asked == "application/vnd.github.object" else "application/json"
    return httpx.Response(200, content=json.dumps(body).encode(), headers={"content-type": kind})


def _app_token(fake: FakeGitHub, request: httpx.Request, p: dict[str, str]) -> httpx.Response:
    # Outside the subset: POST /app/installations/{id}/access_tokens with the app's RS256 JWT.
    if _verify_app_jwt(fake, request) is None:
        return _error(401, "A JSON web token could not be decoded")
    issued = f"ghs_installation_{p['id']}_{next(fake._ids)}"
    fake.tokens[issued] = "cpci-app[bot]"
    return httpx.Response(201, json={"token": issued, "expires_at": "2026-12-01T13:00:00Z"})


def _verify_app_jwt(fake: FakeGitHub, request: httpx.Request) -> dict[str, Any] | None:
    token = request.headers.get("authorization", "").removeprefix("Bearer ")
    try:
        claims: dict[str, Any] = jwt.decode(  # expiry: checked below (tests fake the clock)
            token,
            fake.app_public_key or "",
            algorithms=["RS256"],
            options={"verify_exp": False, "verify_iat": False},
        )
    except jwt.PyJWTError:
        return None
    assert claims["exp"] - claims["iat"] <= 600, "GitHub rejects app JWTs valid over 10 minutes"
    return claims


def _get_app(fake: FakeGitHub, request: httpx.Request, p: dict[str, str]) -> httpx.Response:
    # Outside the subset: GET /app, authenticated with the app's JWT; "slug" names the app,
    # whose installation tokens comment as "<slug>[bot]".
    claims = _verify_app_jwt(fake, request)
    if claims is None:
        return _error(401, "A JSON web token could not be decoded")
    body = {"id": int(claims["iss"]), "slug": "cpci-app", "name": "cpci app"}
    return httpx.Response(200, json=body)


def _get_user(fake: FakeGitHub, request: httpx.Request, p: dict[str, str]) -> httpx.Response:
    # Outside the subset: GET /user. Installation tokens (ghs_..., Actions' GITHUB_TOKEN among
    # them) are not users: GitHub answers 403 "Resource not accessible by integration".
    token = request.headers["authorization"].partition(" ")[2]
    if token.startswith("ghs_"):
        return _error(403, "Resource not accessible by integration")
    return httpx.Response(200, json={"login": fake.tokens[token], "id": 1, "type": "User"})


def _dispatch(fake: FakeGitHub, request: httpx.Request, p: dict[str, str]) -> httpx.Response:
    # actions/create-workflow-dispatch: 204, the run starts later (no run details asked for).
    fake.dispatches.append((f"{p['owner']}/{p['repo']}", unquote(p["workflow_id"]), _body(request)))
    return httpx.Response(204)


_REPO = r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
_REPO_ROUTES: list[tuple[str, str, str | None, Handler]] = [
    ("GET", r"/issues/(?P<n>\d+)/comments", "/issues/{issue_number}/comments", _list_comments),
    (
        "POST",
        r"/issues/(?P<n>\d+)/comments",
        "/issues/{issue_number}/comments",
        _create_comment,
    ),
    (
        "PATCH",
        r"/issues/comments/(?P<id>\d+)",
        "/issues/comments/{comment_id}",
        _update_comment,
    ),
    ("GET", r"/pulls/(?P<n>\d+)", "/pulls/{pull_number}", _get_pull),
    ("GET", r"/pulls/(?P<n>\d+)/files", "/pulls/{pull_number}/files", _list_files),
    ("POST", r"/check-runs", "/check-runs", _create_check),
    ("PATCH", r"/check-runs/(?P<id>\d+)", "/check-runs/{check_run_id}", _update_check),
    ("POST", r"/statuses/(?P<sha>[0-9a-f]+)", "/statuses/{sha}", _create_status),
    ("GET", r"/issues/(?P<n>\d+)/events", "/issues/{issue_number}/events", _list_events),
    (
        "GET",
        r"/collaborators/(?P<username>[^/]+)/permission",
        "/collaborators/{username}/permission",
        _permission,
    ),
    ("GET", r"/contents/(?P<path>.+)", "/contents/{path}", _contents),
    ("GET", r"/pulls/(?P<n>\d+)/reviews", None, _list_reviews),
    (
        "POST",
        r"/actions/workflows/(?P<workflow_id>[^/]+)/dispatches",
        "/actions/workflows/{workflow_id}/dispatches",
        _dispatch,
    ),
]
ROUTES: list[tuple[str, re.Pattern[str], str | None, Handler]] = [
    (m, re.compile(_REPO + rx), t and "/repos/{owner}/{repo}" + t, h)
    for m, rx, t, h in _REPO_ROUTES
] + [
    ("POST", re.compile(r"/app/installations/(?P<id>\d+)/access_tokens"), None, _app_token),
    ("GET", re.compile(r"/app"), None, _get_app),
    ("GET", re.compile(r"/user"), None, _get_user),
]


def _route(request: httpx.Request) -> tuple[str | None, Handler, dict[str, str]]:
    for method, pattern, template, handler in ROUTES:
        match = pattern.fullmatch(request.url.path)
        if method == request.method and match:
            return template, handler, match.groupdict()
    raise AssertionError(f"the fake has no route {request.method} {request.url.path}")
