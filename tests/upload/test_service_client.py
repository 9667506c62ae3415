"""The one client of the service's API, against a live service over loopback HTTP: receipts,
refusals that name the URL, the status and the service's reason, no answer as status 0, and the
PR report that is None until something was uploaded for the PR."""

from __future__ import annotations

import httpx
import pytest

from cpci.upload.errors import UploadFailed
from cpci.upload.retry import Backoff
from cpci.upload.service_client import ServiceClient
from tests.builders import REPO, envelope
from tests.live_server import Request, loopback_socket, serve_answers
from tests.upload.support import LiveService, receipt_body


def test_an_upload_is_stored_once_then_a_duplicate(service: LiveService) -> None:
    client = ServiceClient(service.url + "/", service.token)  # a trailing slash is fine
    first = client.upload(envelope(ci_run_id="client-1"))
    assert (first.status, first.results, first.repository) == ("stored", 1, REPO)
    assert first.shards.text == "1/1 shards reported"
    assert client.upload(envelope(ci_run_id="client-1")).status == "duplicate"


def test_a_refusal_names_the_url_status_and_reason(service: LiveService) -> None:
    client = ServiceClient(service.url, "cpci_wrong")
    with pytest.raises(UploadFailed) as excinfo:
        client.upload(envelope(ci_run_id="client-2"))
    assert excinfo.value.status == 401
    assert not excinfo.value.retryable
    assert str(excinfo.value).startswith(f"{service.url}/api/v1/uploads answered 401: ")


def test_no_answer_is_status_0_and_says_what_to_check() -> None:
    sock = loopback_socket()  # bound, never listening: connections are refused
    try:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        with pytest.raises(UploadFailed) as excinfo:
            ServiceClient(url, "t").upload(envelope(ci_run_id="1"))
    finally:
        sock.close()
    assert excinfo.value.status == 0
    assert excinfo.value.retryable
    assert f"no answer from {url}/api/v1/uploads" in str(excinfo.value)
    assert "--server / CPCI_SERVER, or the Action's server-url" in str(excinfo.value)


def test_the_pull_report_is_none_until_an_upload_names_the_pr(service: LiveService) -> None:
    client = ServiceClient(service.url, service.token)
    assert client.pull_report(REPO, 404_404) is None
    pr_run = envelope(ci_run_id="client-pr").model_copy(
        update={"pull_request": 31, "commit": "b" * 40}
    )
    client.upload(pr_run)
    report = client.pull_report(REPO, 31)
    assert report is not None
    assert report.head_commit == "b" * 40


def test_commit_links_are_recorded_and_a_contradiction_is_refused(service: LiveService) -> None:
    client = ServiceClient(service.url, service.token)
    child, parent, other = "1" * 40, "2" * 40, "3" * 40
    assert client.record_commits(REPO, [(child, parent)], branch="main") == 1
    assert client.record_commits(REPO, [(child, parent)], branch="main") == 1  # again is fine
    with pytest.raises(UploadFailed) as excinfo:
        client.record_commits(REPO, [(child, other)], branch="main")
    assert excinfo.value.status == 409
    with pytest.raises(UploadFailed) as untrusted:
        client.record_commits(REPO, [(other, parent)], branch="wip")
    assert untrusted.value.status == 403
    assert "not a trusted branch" in str(untrusted.value)


def test_only_a_retryable_failure_is_tried_again() -> None:
    answers = [503, 429, 201]
    waits: list[float] = []

    def handle(request: httpx.Request) -> httpx.Response:
        status = answers.pop(0)
        if status == 201:
            return httpx.Response(status, content=receipt_body())
        return httpx.Response(status, json={"detail": "later"})

    retry = Backoff(attempts=3, base_s=0.5, sleep=waits.append, jitter=lambda low, high: high)
    client = ServiceClient("http://cpci", "t", retry=retry, transport=httpx.MockTransport(handle))
    assert client.upload(envelope(ci_run_id="1")).status == "stored"
    assert waits == [0.5, 1.0]
    answers[:] = [422, 201]
    with pytest.raises(UploadFailed, match="answered 422: later"):
        client.upload(envelope(ci_run_id="1"))
    assert answers == [201]  # not tried again


def test_an_answer_that_is_not_a_receipt_says_which_url_sent_it() -> None:
    """A proxy's login page answering 201 is not an upload stored: the message names the URL
    and what to check, and it is no retryable "later"."""

    def login_page(request: Request) -> tuple[int, bytes]:
        return 201, b"<html>please log in</html>"

    with (
        serve_answers(login_page, "text/html") as url,
        pytest.raises(UploadFailed) as excinfo,
    ):
        ServiceClient(url, "t").upload(envelope(ci_run_id="1"))
    message = str(excinfo.value)
    assert message.startswith(f"{url}/api/v1/uploads answered 201 with a body that is not a valid ")
    assert "UploadReceipt" in message
    assert "a cpci service of a compatible version" in message
    assert not excinfo.value.retryable
