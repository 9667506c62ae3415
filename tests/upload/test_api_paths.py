"""The service's API paths the uploader and the Action call, spelled in one place."""

from __future__ import annotations

from cpci import urls
from tests.upload.support import REPO


def test_api_paths_quote_each_segment_of_the_repository() -> None:
    assert urls.api_commits(REPO) == "/api/v1/repos/acme/attn/commits"
    assert urls.api_pull_report(REPO, 7) == "/api/v1/repos/acme/attn/pulls/7/report"
    # A name can never add a segment or a query of its own.
    assert urls.api_commits("acme/a/../b?x#y") == "/api/v1/repos/acme/a%2F..%2Fb%3Fx%23y/commits"
