"""The one URL map: every path it builds is one the service answers, each part a quoted segment."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import unquote, urlsplit

import httpx
import pytest

from cpci import urls
from cpci.upload.service_client import ServiceClient
from tests.builders import REPO, config, envelope
from tests.upload.support import LiveService, service

__all__ = ["service"]  # the live service fixture, shared with the upload tests

#: A run id with a space and query characters: each must stay inside its segment. (The service
#: routes a decoded path, so a run id holding `/` is uploaded but its pages are not found.)
RUN_ID = "run 1?x#y"
CONFIG = config("p2p")


@pytest.fixture(scope="module")
def uploaded(service: LiveService) -> LiveService:
    """One PR shard of run RUN_ID, so every page and resource of the map has something to show."""
    body = envelope(commit="c" * 40, ci_run_id=RUN_ID, pull_request=7, branch=None)
    receipt = ServiceClient(service.url, service.token).upload(body)
    assert receipt.run_url == urls.run(REPO, RUN_ID)  # the receipt links with the same map
    return service


def test_api_paths_quote_each_segment_of_the_repository() -> None:
    assert urls.api_commits(REPO) == "/api/v1/repos/acme/attn/commits"
    assert urls.api_pull_report(REPO, 7) == "/api/v1/repos/acme/attn/pulls/7/report"
    # A name can never add a segment or a query of its own.
    assert urls.api_commits("acme/a/../b?x#y") == "/api/v1/repos/acme/a%2F..%2Fb%3Fx%23y/commits"


@pytest.mark.parametrize("build", [urls.run, urls.api_run_summary, urls.api_run_detail])
def test_a_run_id_is_one_segment(build: Callable[[str, str], str]) -> None:
    path = build(REPO, RUN_ID)
    assert "?" not in path
    segments = path.split("/")
    assert unquote(segments[segments.index("runs") + 1]) == RUN_ID


def test_the_two_run_resources_have_two_names() -> None:
    """The run's summary and the run page's twin are different URLs (both were `api_run`)."""
    summary, detail = urls.api_run_summary(REPO, "9"), urls.api_run_detail(REPO, "9")
    assert summary == "/api/v1/repos/acme/attn/runs/9"
    assert detail == summary + "/detail"


@pytest.mark.parametrize(
    ("path", "shape"),
    [
        (urls.api_run_summary(REPO, RUN_ID), "attempts"),
        (urls.api_run_detail(REPO, RUN_ID), "shards"),
        (urls.api_pull_report(REPO, 7), "new_failures"),
        (urls.api_pull_page(REPO, 7), "report"),
        (urls.api_dashboard(REPO), "runs"),
        (urls.api_config(REPO, CONFIG), "config"),
        (urls.api_evidence(REPO), "configs"),
        (urls.api_evidence(REPO, branch="main"), "configs"),
        (urls.api_quarantines(REPO), "quarantines"),
    ],
)
def test_each_api_path_is_a_resource_of_the_service(
    uploaded: LiveService, path: str, shape: str
) -> None:
    answer = httpx.get(uploaded.url + path, timeout=60)
    assert answer.status_code == 200, (path, answer.text)
    assert shape in answer.json(), (path, sorted(answer.json()))


@pytest.mark.parametrize(
    "path",
    [
        urls.index(),
        urls.dashboard(REPO),
        urls.dashboard(REPO, branch="main"),
        urls.run(REPO, RUN_ID),
        urls.pull(REPO, 7),
        urls.config(REPO, CONFIG),
    ],
)
def test_each_ui_path_is_a_page_of_the_service(uploaded: LiveService, path: str) -> None:
    answer = httpx.get(uploaded.url + path, timeout=60)
    assert answer.status_code == 200, (path, answer.text[:500])
    assert answer.headers["content-type"].startswith("text/html")


def test_a_page_links_its_json_twin(uploaded: LiveService) -> None:
    page = httpx.get(uploaded.url + urls.run(REPO, RUN_ID), timeout=60).text
    twin = urls.api_run_detail(REPO, RUN_ID)
    assert twin in page or twin.replace("&", "&amp;") in page


@pytest.mark.parametrize("run_id", ["../../settings", "..", "%2e%2e"])
def test_the_github_run_link_stays_under_actions(run_id: str) -> None:
    url = urls.Links("https://github.example").run(REPO, run_id, 1)
    assert urlsplit(url).path.startswith(f"/{REPO}/actions")


def test_a_run_links_to_github_where_github_ran_it_else_to_this_service() -> None:
    links = urls.Links("https://github.example", service_url="https://cpci.example/")
    assert links.run_page(REPO, "123", 2) == (
        "https://github.example/acme/attn/actions/runs/123/attempts/2"
    )
    assert links.run_page(REPO, "local-20261202T010203", 1) == (
        "https://cpci.example/ui/acme/attn/runs/local-20261202T010203"
    )
    assert urls.Links().run_page(REPO, "demo-1", 1) == "/ui/acme/attn/runs/demo-1"
