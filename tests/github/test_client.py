"""The GitHub client against the fake: pagination, retries and waits, errors, app auth."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from openapi_core.validation.request.exceptions import InvalidRequestBody

from cpci.github.auth import AppAuth, TokenAuth
from cpci.github.client import COMMENT_LIMIT, GitHubClient
from cpci.github.errors import (
    AuthenticationFailed,
    NotFound,
    PermissionDenied,
    RateLimited,
    ServerError,
)
from cpci.github.retry import RetryPolicy
from tests.github.conftest import FakeClock
from tests.github.fake_github import FakeGitHub

REPO = "octo-org/hello"
HEAD, BASE = "a" * 40, "b" * 40


def test_comments_are_listed_across_pages(fake: FakeGitHub, client: GitHubClient) -> None:
    for i in range(230):
        fake.add_comment(REPO, 7, f"comment {i}", "someone")
    comments = client.list_issue_comments(REPO, 7)
    assert [c.body for c in comments] == [f"comment {i}" for i in range(230)]
    pages = [call for call in fake.calls if call[0] == "GET"]
    assert len(pages) == 3  # 100 + 100 + 30, following rel="next"


def test_who_labelled_and_who_may_write(fake: FakeGitHub, client: GitHubClient) -> None:
    """issues/list-events and repos/get-collaborator-permission-level, held to the contract."""
    fake.add_pull(REPO, 7, head_sha=HEAD, base_sha=BASE)
    fake.label(REPO, 7, "cpci-ack:pair", by="drive-by")
    fake.unlabel(REPO, 7, "cpci-ack:pair", by="maintainer")
    fake.label(REPO, 7, "cpci-ack:pair", by="maintainer")
    events = client.list_issue_events(REPO, 7)
    assert [(e.event, e.actor_login, e.label) for e in events] == [
        ("labeled", "drive-by", "cpci-ack:pair"),
        ("unlabeled", "maintainer", "cpci-ack:pair"),
        ("labeled", "maintainer", "cpci-ack:pair"),
    ]
    fake.grant(REPO, "maintainer", "write")
    assert client.permission(REPO, "maintainer") == "write"
    assert client.permission(REPO, "drive-by") == "read"
    fake.fail("GET", "/collaborators/ghost/permission$", 404, message="Not Found")
    assert client.permission(REPO, "ghost") == "none"


def test_create_then_edit_a_comment(fake: FakeGitHub, client: GitHubClient) -> None:
    created = client.create_issue_comment(REPO, 7, "first")
    assert created.user_login == "cpci-bot[bot]"
    edited = client.update_issue_comment(REPO, created.id, "second")
    assert edited.id == created.id
    assert [c["body"] for c in fake.comments[(REPO, 7)]] == ["second"]


def test_pull_and_its_files_with_a_rename(fake: FakeGitHub, client: GitHubClient) -> None:
    fake.add_pull(
        REPO,
        7,
        head_sha=HEAD,
        base_sha=BASE,
        labels=("cpci-ack:pair",),
        files=[("modified", "a.py"), ("renamed", "new.py", "old.py")],
    )
    pull = client.get_pull(REPO, 7)
    assert (pull.head_sha, pull.base_sha, pull.labels) == (HEAD, BASE, ("cpci-ack:pair",))
    files = client.list_pull_files(REPO, 7)
    assert [(f.filename, f.previous_filename) for f in files] == [
        ("a.py", None),
        ("new.py", "old.py"),
    ]


def test_server_errors_are_retried_with_backoff(
    fake: FakeGitHub, client: GitHubClient, clock: FakeClock
) -> None:
    fake.add_pull(REPO, 7, head_sha=HEAD, base_sha=BASE)
    fake.fail("GET", "/pulls/7$", 502, times=1)
    fake.fail("GET", "/pulls/7$", 503, times=1)
    assert client.get_pull(REPO, 7).number == 7
    assert clock.slept == [1.0, 2.0]


def test_server_errors_give_up_after_the_last_attempt(fake: FakeGitHub, clock: FakeClock) -> None:
    fake.fail("POST", "/check-runs", 500, times=10)
    with (
        GitHubClient(
            TokenAuth("ghs_test"),
            transport=fake.transport(),
            clock=clock.clock(),
            retry=RetryPolicy(attempts=3),
        ) as gh,
        pytest.raises(ServerError, match="retry later"),
    ):
        gh.create_check_run(REPO, {"name": "cpci", "head_sha": HEAD, "status": "queued"})
    assert len(fake.calls) == 3


def test_secondary_rate_limit_honours_retry_after(
    fake: FakeGitHub, client: GitHubClient, clock: FakeClock
) -> None:
    fake.fail(
        "POST",
        "/comments$",
        403,
        headers={"Retry-After": "7"},
        message="You have exceeded a secondary rate limit.",
    )
    client.create_issue_comment(REPO, 7, "hello")
    assert clock.slept == [7.0]
    assert len(fake.comments[(REPO, 7)]) == 1


def test_secondary_rate_limit_without_headers_waits_a_minute(
    fake: FakeGitHub, client: GitHubClient, clock: FakeClock
) -> None:
    fake.fail("GET", "/comments$", 403, message="You have exceeded a secondary rate limit.")
    client.list_issue_comments(REPO, 7)
    assert clock.slept == [60.0]


def test_spent_primary_limit_waits_until_reset(
    fake: FakeGitHub, client: GitHubClient, clock: FakeClock
) -> None:
    reset = int(clock.t) + 120
    fake.fail(
        "GET",
        "/comments$",
        403,
        message="API rate limit exceeded",
        headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
    )
    client.list_issue_comments(REPO, 7)
    assert clock.slept == [121.0]


def test_a_success_that_spends_the_limit_delays_the_next_call(
    fake: FakeGitHub, client: GitHubClient, clock: FakeClock
) -> None:
    fake.rate_limit_reset = int(clock.t) + 30
    client.list_issue_comments(REPO, 7)
    assert clock.slept == []
    client.list_issue_comments(REPO, 7)
    assert clock.slept == [31.0]


def test_a_rate_limit_too_long_to_wait_is_raised(fake: FakeGitHub, clock: FakeClock) -> None:
    fake.fail("GET", "/comments$", 429, headers={"Retry-After": "3600"})
    with (
        GitHubClient(
            TokenAuth("ghs_test"),
            transport=fake.transport(),
            clock=clock.clock(),
            retry=RetryPolicy(max_wait_s=600),
        ) as gh,
        pytest.raises(RateLimited, match="App installation token"),
    ):
        gh.list_issue_comments(REPO, 7)
    assert clock.slept == []


def test_read_only_fork_token_says_what_to_do(fake: FakeGitHub, client: GitHubClient) -> None:
    fake.fail("POST", "/comments$", 403, message="Resource not accessible by integration")
    with pytest.raises(PermissionDenied, match=r"fork.*workflow_run") as caught:
        client.create_issue_comment(REPO, 7, "hello")
    assert "Resource not accessible by integration" in str(caught.value)
    assert caught.value.status == 403


def test_bad_token_and_missing_pull(fake: FakeGitHub, clock: FakeClock) -> None:
    with (
        GitHubClient(TokenAuth("nope"), transport=fake.transport(), clock=clock.clock()) as gh,
        pytest.raises(AuthenticationFailed, match="GITHUB_TOKEN"),
    ):
        gh.get_pull(REPO, 7)
    with GitHubClient(TokenAuth("ghs_test"), transport=fake.transport(), clock=clock.clock()) as gh:
        with pytest.raises(NotFound):
            gh.get_pull(REPO, 404)
        assert gh.get_file(REPO, ".github/cpci.yml", HEAD, max_bytes=1000) is None


def test_the_fake_rejects_requests_outside_the_contract(client: GitHubClient) -> None:
    """The validator is real: a check-run status GitHub does not know is refused."""
    with pytest.raises(InvalidRequestBody) as refused:
        client.create_check_run(REPO, {"name": "cpci", "head_sha": HEAD, "status": "bogus"})
    assert "'bogus' is not one of ['queued', 'in_progress', 'completed'" in str(refused.value)


def test_comment_over_githubs_limit_is_refused_before_sending(
    fake: FakeGitHub, client: GitHubClient
) -> None:
    with pytest.raises(ValueError, match="65,536"):
        client.create_issue_comment(REPO, 7, "x" * (COMMENT_LIMIT + 1))
    assert fake.calls == []


def test_github_app_installation_token_is_fetched_once_and_renewed(
    clock: FakeClock,
) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    fake = FakeGitHub(app_public_key=public)
    clock.t = 1_796_126_400.0  # 2026-12-01T11:00:00Z; the fake's tokens expire at 13:00Z
    auth = AppAuth(app_id="12345", private_key=pem, installation_id=42)
    with GitHubClient(auth, transport=fake.transport(), clock=clock.clock()) as gh:
        gh.create_issue_comment(REPO, 7, "one")
        gh.create_issue_comment(REPO, 7, "two")
        assert [c[1] for c in fake.calls].count("/app/installations/42/access_tokens") == 1
        clock.t += 2 * 3600 - 200  # within five minutes of expiry: renew
        gh.create_issue_comment(REPO, 7, "three")
    assert [c[1] for c in fake.calls].count("/app/installations/42/access_tokens") == 2
    assert {c["user"]["login"] for c in fake.comments[(REPO, 7)]} == {"cpci-app[bot]"}


def test_over_real_loopback_http(fake: FakeGitHub, clock: FakeClock) -> None:
    fake.add_pull(
        REPO, 7, head_sha=HEAD, base_sha=BASE, files=[("added", f"f{i}.py") for i in range(150)]
    )
    fake.fail("GET", "/files$", 503)
    with (
        fake.serve() as url,
        GitHubClient(TokenAuth("ghs_test"), api_url=url, clock=clock.clock()) as gh,
    ):
        assert len(gh.list_pull_files(REPO, 7)) == 150
        created = gh.create_issue_comment(REPO, 7, "over the wire")
        gh.update_issue_comment(REPO, created.id, "edited over the wire")
    assert clock.slept == [1.0]
    assert fake.comments[(REPO, 7)][0]["body"] == "edited over the wire"
