"""The one GitHub REST client the bot uses: comments, pull requests, files, check runs, statuses.

Every call goes through `request`, which adds the auth and the pinned API version, retries 5xx
and secondary rate limits, waits out a spent primary limit, and maps failures to
`cpci.github.errors`. The transport and the clock are injectable: tests talk to a fake GitHub.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import Any, Literal
from urllib.parse import quote

import httpx

from cpci import __version__
from cpci.github.auth import Auth
from cpci.github.errors import GitHubError, NotFound, PermissionDenied, Unreachable, error_for
from cpci.github.models import (
    ChangedFile,
    CheckRun,
    Comment,
    IssueEvent,
    PullRequest,
    RepoFile,
    Review,
)
from cpci.github.retry import Clock, RetryPolicy, primary_reset_wait

API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
#: GitHub rejects issue comments longer than this (characters).
COMMENT_LIMIT = 65_536
REPOSITORY = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
StatusState = Literal["error", "failure", "pending", "success"]


class GitHubClient:
    """A small synchronous GitHub REST client. Use as a context manager, or call `close()`."""

    def __init__(
        self,
        auth: Auth,
        *,
        api_url: str = API_URL,
        transport: httpx.BaseTransport | None = None,
        clock: Clock | None = None,
        retry: RetryPolicy | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self._auth = auth
        self._clock = clock or Clock()
        self._retry = retry or RetryPolicy()
        self._limited_until = 0.0
        self._http = httpx.Client(
            base_url=api_url.rstrip("/"),
            transport=transport,
            timeout=timeout_s,
            headers={
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": f"cpci/{__version__}",
            },
        )

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # -- the plumbing -----------------------------------------------------------------------

    def request(
        self,
        method: str,
        url: str,
        *,
        action: str,
        json: Any = None,
        params: Mapping[str, str | int] | None = None,
        expect: tuple[int, ...] = (200,),
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """One call, retried as `RetryPolicy` allows; a response outside `expect` raises."""
        attempt = 0
        while True:
            attempt += 1
            self._wait_for_primary_limit()
            auth = {"Authorization": f"Bearer {self._auth.token(self._http, self._clock)}"}
            try:
                response = self._http.request(
                    method, url, json=json, params=params, headers={**auth, **(headers or {})}
                )
            except httpx.TransportError as exc:
                if attempt >= self._retry.attempts:
                    raise Unreachable(
                        f"{action}: no answer from GitHub after {attempt} tries ({exc}); check "
                        "the network and the API URL",
                        url=url,
                    ) from exc
                self._clock.sleep(self._retry.backoff(attempt))
                continue
            if response.status_code in expect:
                self._note_primary_limit(response)
                return response
            delay = self._retry.delay(response, attempt, self._clock.now())
            if delay is None:
                raise error_for(response, action=action)
            self._clock.sleep(delay)

    def paginate(
        self, url: str, *, action: str, params: Mapping[str, str | int] | None = None
    ) -> Iterator[Any]:
        """Every item of a list endpoint, following the `Link: <...>; rel="next"` header."""
        next_url: str | None = url
        query: Mapping[str, str | int] | None = {"per_page": 100, **(params or {})}
        while next_url is not None:
            response = self.request("GET", next_url, action=action, params=query)
            yield from response.json()
            next_url = response.links.get("next", {}).get("url")
            query = None  # the next link carries the query already

    def _wait_for_primary_limit(self) -> None:
        wait = self._limited_until - self._clock.now()
        if wait > 0:
            self._clock.sleep(wait)

    def _note_primary_limit(self, response: httpx.Response) -> None:
        wait = primary_reset_wait(response.headers, self._clock.now())
        if wait is not None:
            self._limited_until = self._clock.now() + min(wait, self._retry.max_wait_s)

    # -- who we are ---------------------------------------------------------------------------

    def bot_login(self) -> str:
        """The login our comments carry, asked of GitHub: `<slug>[bot]` for a GitHub App (from
        `GET /app`, with the app's own JWT), the user's login for a personal token (`GET
        /user`). Actions' `GITHUB_TOKEN` may ask neither: set the login instead."""
        app_jwt = getattr(self._auth, "app_jwt", None)
        try:
            if callable(app_jwt):
                response = self.request(
                    "GET",
                    "/app",
                    action="reading the GitHub App (GET /app)",
                    headers={"Authorization": f"Bearer {app_jwt(self._clock.now())}"},
                )
                return f"{response.json()['slug']}[bot]"
            response = self.request("GET", "/user", action="reading the token's user (GET /user)")
            return str(response.json()["login"])
        except (PermissionDenied, NotFound, KeyError, TypeError, ValueError) as exc:
            raise GitHubError(
                f"cannot tell the bot's login from GitHub ({exc}); set it (CPCI_GITHUB_BOT_LOGIN, "
                "e.g. github-actions[bot] for GITHUB_TOKEN, my-app[bot] for an App), so only "
                "its own comments are ever edited"
            ) from exc

    # -- issue comments ---------------------------------------------------------------------

    def list_issue_comments(self, repo: str, number: int) -> list[Comment]:
        url = f"/repos/{_repo(repo)}/issues/{number}/comments"
        action = f"listing the comments of {repo}#{number}"
        return [Comment.from_api(item) for item in self.paginate(url, action=action)]

    def create_issue_comment(self, repo: str, number: int, body: str) -> Comment:
        _check_body(body)
        response = self.request(
            "POST",
            f"/repos/{_repo(repo)}/issues/{number}/comments",
            action=f"commenting on {repo}#{number}",
            json={"body": body},
            expect=(201,),
        )
        return Comment.from_api(response.json())

    def update_issue_comment(self, repo: str, comment_id: int, body: str) -> Comment:
        _check_body(body)
        response = self.request(
            "PATCH",
            f"/repos/{_repo(repo)}/issues/comments/{comment_id}",
            action=f"editing comment {comment_id} in {repo}",
            json={"body": body},
        )
        return Comment.from_api(response.json())

    # -- pull requests ----------------------------------------------------------------------

    def get_pull(self, repo: str, number: int) -> PullRequest:
        response = self.request(
            "GET", f"/repos/{_repo(repo)}/pulls/{number}", action=f"reading {repo}#{number}"
        )
        return PullRequest.from_api(response.json())

    def list_pull_files(self, repo: str, number: int) -> list[ChangedFile]:
        """The PR's changed files (GitHub lists at most 3,000)."""
        url = f"/repos/{_repo(repo)}/pulls/{number}/files"
        action = f"listing the files of {repo}#{number}"
        return [ChangedFile.from_api(item) for item in self.paginate(url, action=action)]

    def list_pull_reviews(self, repo: str, number: int) -> list[Review]:
        """The PR's reviews, oldest first (an approval may carry a `cpci-ack:` line)."""
        url = f"/repos/{_repo(repo)}/pulls/{number}/reviews"
        action = f"listing the reviews of {repo}#{number}"
        return [Review.from_api(item) for item in self.paginate(url, action=action)]

    def list_issue_events(self, repo: str, number: int) -> list[IssueEvent]:
        """The issue's (or PR's) events, oldest first: who added and removed which label."""
        url = f"/repos/{_repo(repo)}/issues/{number}/events"
        action = f"listing the events of {repo}#{number}"
        return [IssueEvent.from_api(item) for item in self.paginate(url, action=action)]

    def permission(self, repo: str, login: str) -> str:
        """`login`'s permission on the repository: `admin`, `write`, `read` or `none` (GitHub's
        legacy levels: `maintain` reads as `write`, `triage` as `read`); `none` for a login
        GitHub does not know."""
        try:
            response = self.request(
                "GET",
                f"/repos/{_repo(repo)}/collaborators/{quote(login, safe='')}/permission",
                action=f"reading {login}'s permission on {repo}",
            )
        except NotFound:
            return "none"
        return str(response.json()["permission"])

    def get_file(self, repo: str, path: str, ref: str, *, max_bytes: int) -> RepoFile | None:
        """The file at `ref` (repos/get-content), None where there is none (no rules file, a
        file the PR adds). Asked in GitHub's object media type, which gives the size of any
        file and its content up to 1 MB: a file over `max_bytes` comes back without its text,
        and is never decoded."""
        try:
            response = self.request(
                "GET",
                f"/repos/{_repo(repo)}/contents/{quote(path.lstrip('/'))}",
                action=f"reading {path} at {ref[:12]} in {repo}",
                params={"ref": ref},
                headers={"Accept": "application/vnd.github.object"},
            )
        except NotFound:
            return None
        return RepoFile.from_api(response.json(), max_bytes)

    # -- check runs and statuses ------------------------------------------------------------

    def create_check_run(self, repo: str, fields: Mapping[str, Any]) -> CheckRun:
        response = self.request(
            "POST",
            f"/repos/{_repo(repo)}/check-runs",
            action=f"creating check run {fields.get('name')!r} in {repo}",
            json=dict(fields),
            expect=(201,),
        )
        return CheckRun.from_api(response.json())

    def update_check_run(self, repo: str, check_run_id: int, fields: Mapping[str, Any]) -> CheckRun:
        response = self.request(
            "PATCH",
            f"/repos/{_repo(repo)}/check-runs/{check_run_id}",
            action=f"updating check run {check_run_id} in {repo}",
            json=dict(fields),
        )
        return CheckRun.from_api(response.json())

    def dispatch_workflow(
        self, repo: str, workflow: str, *, ref: str, inputs: Mapping[str, str]
    ) -> None:
        """Run `workflow` (its file name, e.g. `cpci-shards.yml`) on `ref` with `inputs`
        (actions/create-workflow-dispatch): the bisection's next run."""
        self.request(
            "POST",
            f"/repos/{_repo(repo)}/actions/workflows/{quote(workflow, safe='')}/dispatches",
            action=f"dispatching {workflow} on {ref} in {repo}",
            json={"ref": ref, "inputs": dict(inputs)},
            expect=(204,),
        )

    def create_status(
        self,
        repo: str,
        sha: str,
        *,
        state: StatusState,
        context: str,
        description: str,
        target_url: str | None = None,
    ) -> None:
        """A commit status: the fallback where the token may not create check runs (a PAT)."""
        body: dict[str, str] = {"state": state, "context": context, "description": description}
        if target_url:
            body["target_url"] = target_url
        self.request(
            "POST",
            f"/repos/{_repo(repo)}/statuses/{sha}",
            action=f"setting status {context!r} on {sha[:12]} in {repo}",
            json=body,
            expect=(201,),
        )


def _repo(repo: str) -> str:
    if not REPOSITORY.fullmatch(repo):
        raise ValueError(f"a GitHub repository is OWNER/NAME, got {repo!r}")
    return repo


def _check_body(body: str) -> None:
    if len(body) > COMMENT_LIMIT:
        raise ValueError(
            f"comment body is {len(body):,} characters, over GitHub's {COMMENT_LIMIT:,}: render "
            "it with cpci.github.comment.render (which truncates) instead"
        )
