"""Infra storms and capped report sections.

Unit tests pin the storm rule's boundaries (share, minimum count, one signature, per shard and
leg); the end-to-end test uploads a passing base and a head whose shard failed every config
with one NCCL error, through a real uvicorn on 127.0.0.1, and reads the report, the paged
section endpoint, the PR page, the section pages and the PR comment. The upload builds the
report's read model before it answers (the cache's counts show no second read), and two first
reads at once read the head once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from cpci import urls
from cpci.github.comment import CommentOptions, render
from cpci.github.publish import check_run_fields
from cpci.schema import Outcome, PullRequestReport, ReportSectionPage
from cpci.server import Settings, create_app
from cpci.server.analysis.pull_report import ConfigLeg, report_order
from cpci.server.analysis.storms import StormPolicy, failure_signature, find_storms
from cpci.server.analysis.verdicts import ResultView
from cpci.server.crud.shard_cache import KindCounts, ShardCache
from tests.builders import BASE, HEAD, REPO, config, envelope, record, upload
from tests.live_server import serve
from tests.server.cache_listener import Sequenced

NCCL = "NCCL error in: ProcessGroupNCCL.cpp:{n}, unhandled system error, NCCL version 2.{n}"


def crashed(n: int = 1) -> list[ResultView]:
    text = NCCL.format(n=n)
    return [ResultView("crashed", messages=(text,), culprit=text)]


def failed(text: str) -> list[ResultView]:
    return [ResultView("failed", messages=(text,), culprit=text)]


PASSED = [ResultView("passed")]


def storms_in(
    results: Sequence[list[ResultView]], policy: StormPolicy, shard: int = 0, leg: str = ""
) -> list[Any]:
    head = dict(enumerate(results))
    return find_storms(head, {k: (shard, leg) for k in head}, policy).found


@pytest.mark.parametrize(
    ("failing", "passing", "storm"),
    [
        (20, 5, True),  # exactly 80%, exactly the minimum count
        (19, 5, False),  # 79%: below the share
        (19, 0, False),  # 100%, one short of the minimum count
        (40, 11, False),  # 78%
    ],
)
def test_a_storm_needs_the_share_and_the_minimum_count(
    failing: int, passing: int, storm: bool
) -> None:
    results = [crashed(i) for i in range(failing)] + [PASSED] * passing
    found = storms_in(results, StormPolicy(share=0.8, min_configs=20))
    assert bool(found) is storm
    if storm:
        (only,) = found
        assert (only.configs, only.of) == (failing, failing + passing)
        assert only.infra_rule == "nccl-system"
        assert "N" in only.signature
        assert "2." not in only.signature


def test_two_signatures_splitting_a_shard_make_no_storm() -> None:
    half = [crashed(i) for i in range(15)] + [failed("AssertionError: 0.5 > 0.01")] * 15
    assert storms_in(half, StormPolicy(share=0.8, min_configs=10)) == []


def test_a_rerun_that_passed_is_not_part_of_a_storm() -> None:
    rerun = [*crashed(), ResultView("passed", attempt=2)]
    assert failure_signature(rerun) is None
    results = [crashed()] * 8 + [rerun] * 2
    assert storms_in(results, StormPolicy(share=0.9, min_configs=5)) == []


def test_storms_are_found_per_shard_and_leg() -> None:
    head = {i: crashed() if i < 10 else PASSED for i in range(20)}
    where = {i: (0 if i < 10 else 1, "h100") for i in head}
    (storm,) = find_storms(head, where, StormPolicy(share=0.8, min_configs=5)).found
    assert (storm.shard, storm.leg, storm.configs, storm.of) == (0, "h100", 10, 10)
    mixed = {i: (0, "h100" if i % 2 else "a100") for i in head}  # half of each leg fails
    assert find_storms(head, mixed, StormPolicy(share=0.8, min_configs=5)).found == []


def test_an_assertion_storm_has_no_infra_rule() -> None:
    results = [failed(f"AssertionError: max abs error {i}.5 > 0.01") for i in range(30)]
    (storm,) = storms_in(results, StormPolicy(share=0.8, min_configs=20))
    assert storm.infra_rule is None


def test_configs_sharing_result_views_are_counted_one_by_one() -> None:
    """Loaders share one view among identical results, and storms sign each group of configs
    holding the same views once: the counts, the configs caught and the shards stay as if each
    config were signed alone."""
    shared = crashed(1)
    rerun = [shared[0], ResultView("passed", attempt=2)]
    head: dict[int, list[ResultView]] = {}
    for i in range(60):
        head[i] = list(shared) if i % 3 else crashed(1)  # equal views, shared or not
    for i in range(60, 70):
        head[i] = list(rerun)  # passed on a rerun: in no storm
    where = {i: (0 if i < 70 else 1, "") for i in head}
    for i in range(70, 80):  # the same shared views on another shard
        head[i] = list(shared)
        where[i] = (1, "")
    found = find_storms(head, where, StormPolicy(share=0.8, min_configs=5))
    assert [(s.shard, s.configs, s.of) for s in found.found] == [(0, 60, 70), (1, 10, 10)]
    caught = {k: storm.shard for k in head if (storm := found.of.get(k)) is not None}
    assert caught == {**dict.fromkeys(range(60), 0), **dict.fromkeys(range(70, 80), 1)}


def test_configs_sharing_views_across_shards_and_legs_are_counted_per_place() -> None:
    """One list of shared views, held by configs of three places interleaved in the head's
    order: each place counts only its own (the grouping by views is per place)."""
    shared = crashed(1)
    places = [(0, "h100"), (1, "h100"), (0, "a100")]
    head = {i: list(shared) if i % 4 else PASSED for i in range(90)}
    where = {i: places[i % 3] for i in head}
    found = find_storms(head, where, StormPolicy(share=0.7, min_configs=5)).found
    assert [(s.shard, s.leg, s.configs, s.of) for s in found] == [
        (0, "a100", 23, 30),  # i = 8 mod 12 passed: 7 of them
        (0, "h100", 22, 30),
        (1, "h100", 22, 30),
    ]


@pytest.mark.parametrize(("share", "count"), [(0.0, 5), (1.5, 5), (0.8, 0)])
def test_a_bad_storm_policy_is_refused(share: float, count: int) -> None:
    with pytest.raises(ValueError, match="storm"):
        StormPolicy(share=share, min_configs=count)


def test_sections_list_configs_by_key_then_leg() -> None:
    head = dict.fromkeys(
        [ConfigLeg(2, "h100"), ConfigLeg(1, "h100"), ConfigLeg(3, ""), ConfigLeg(2, "a100")]
    )
    keys = {1: "t[b]@2", 2: "t[a]@2", 3: "t[a]@4"}
    assert report_order(head, keys) == [
        ConfigLeg(2, "a100"),
        ConfigLeg(2, "h100"),
        ConfigLeg(3, ""),
        ConfigLeg(1, "h100"),
    ]


CONFIGS, CAP = 300, 50


def names(items: list[dict[str, Any]]) -> list[str]:
    return [item["config"] for item in items]


def storm_service(engine: Engine, db_url: str, **overrides: Any) -> Any:
    settings = Settings(
        database_url=db_url, report_section_cap=CAP, storm_min_configs=20, **overrides
    )
    return create_app(settings, engine=engine)


def seed_storm(client: httpx.Client, token: str, head_outcome: Outcome, message: str) -> None:
    """A base where every config passes; a PR head where every config fails one way (on
    two attempts each, so only the storm rule can make them INFRA)."""
    base = [record(f"c{i:03d}") for i in range(CONFIGS)]
    upload(client, envelope(base), token=token)
    head = [
        record(f"c{i:03d}", head_outcome, message=message.format(n=i), attempt=attempt)
        for i in range(CONFIGS)
        for attempt in (1, 2)
    ]
    upload(
        client,
        envelope(
            head, commit=HEAD, branch="feature", pull_request=7, base_commit=BASE, ci_run_id="200"
        ),
        token=token,
    )


def test_an_infra_storm_end_to_end(engine: Engine, db_url: str, token: str) -> None:
    app = storm_service(engine, db_url)
    with serve(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        seed_storm(client, token, "crashed", NCCL)
        response = client.get(urls.api_pull_report(REPO, 7))
        assert response.status_code == 200, response.text
        report = PullRequestReport.model_validate_json(response.content)

        (storm,) = report.storms
        assert (storm.shard, storm.configs, storm.of) == (0, CONFIGS, CONFIGS)
        assert storm.infra_rule == "nccl-system"
        assert report.counts.by_verdict == {"infra": CONFIGS}  # not 300 new failures
        assert report.section_cap == CAP
        assert len(report.infra) == CAP
        assert report.total("infra") == CONFIGS
        assert all("infra storm" in v.reason for v in report.infra)

        pages: list[str] = []
        offset: int | None = 0
        while offset is not None:
            page = client.get(urls.api_pull_report_section(REPO, 7, "infra", offset) + "&limit=120")
            assert page.status_code == 200, page.text
            data = ReportSectionPage.model_validate_json(page.content)
            assert data.total == CONFIGS
            assert data.offset == offset
            pages += [v.config for v in data.verdicts]
            offset = data.next_offset
        assert len(pages) == CONFIGS
        assert len(set(pages)) == CONFIGS
        assert pages[:CAP] == [v.config for v in report.infra]  # the report holds the first
        assert pages == sorted(pages)

        empty = client.get(urls.api_pull_report_section(REPO, 7, "new_failures"))
        assert empty.json()["total"] == 0
        assert empty.json()["next_offset"] is None
        unknown = client.get(f"{urls.api_pull_report(REPO, 7)}/everything")
        assert unknown.status_code == 422
        assert "new_failures" in unknown.text  # the answer names the sections there are

        html = client.get(urls.pull(REPO, 7))
        assert html.status_code == 200
        assert f"Showing the first {CAP} of {CONFIGS}" in html.text
        assert html.text.count('<tr><td class="config"><a href="/ui/') == CAP
        assert "Storm on shard 0: 300 of 300 configs" in html.text
        more = re.search(r'href="(/ui/[^"]+/sections/infra\?offset=\d+)"', html.text)
        assert more is not None
        assert more.group(1) == urls.pull_section(REPO, 7, "infra", CAP)
        second = client.get(more.group(1).replace("&amp;", "&"))
        assert second.status_code == 200
        assert f"{CAP + 1}–{2 * CAP} of {CONFIGS}" in second.text
        assert 'rel="next"' in second.text
        assert 'rel="prev"' in second.text

    comment = render(report, None, CommentOptions(service_url="https://cpci.example"))
    storm_line = next(line for line in comment.splitlines() if "Storm" in line)
    assert "300 of 300 configs" in storm_line
    assert "nccl\\-system" not in storm_line
    assert "`nccl-system`" in storm_line
    assert "not this PR's" in storm_line
    assert f"Infra ({CONFIGS:,})" in comment  # the section counts the whole storm
    assert f"and {CONFIGS - 50:,} more" in comment
    assert "state=neutral" in comment.splitlines()[0]  # infra does not gate; nor is it green
    check = check_run_fields(report, None, head_sha=HEAD)
    assert check["conclusion"] == "neutral"
    assert "storm on 1 shard(s)" in check["output"]["title"]
    assert check["output"]["summary"].startswith("🌩️ **Storm**")


def test_a_storm_without_an_infra_rule_still_fails_the_gate(
    engine: Engine, db_url: str, token: str
) -> None:
    """A PR that breaks every config must not pass as "infra": flagged, verdicts kept."""
    app = storm_service(engine, db_url)
    with serve(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        seed_storm(client, token, "failed", "ImportError: cannot import name attn_{n}")
        report = PullRequestReport.model_validate(client.get(urls.api_pull_report(REPO, 7)).json())
    (storm,) = report.storms
    assert storm.infra_rule is None
    assert storm.configs == CONFIGS
    assert report.counts.by_verdict == {"new_failure": CONFIGS}
    assert len(report.new_failures) == CAP
    assert report.total("new_failures") == CONFIGS
    comment = render(report, None)
    assert comment.splitlines()[0].endswith("state=failure -->")
    assert f"## ❌ cpci: {CONFIGS} new failure(s)" in comment
    assert "verdicts stand" in comment
    assert check_run_fields(report, None, head_sha=HEAD)["conclusion"] == "failure"


def test_a_rerun_clears_a_storm_the_service_has_read(
    engine: Engine, db_url: str, token: str
) -> None:
    """The head is read once per set of head shards and kept: a rerun attempt is a new set, so
    the report, its sections and the page answer from the new upload, not from the storm."""
    app = storm_service(engine, db_url)
    with serve(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        seed_storm(client, token, "crashed", NCCL)
        before = PullRequestReport.model_validate(client.get(urls.api_pull_report(REPO, 7)).json())
        assert before.total("infra") == CONFIGS
        section = client.get(urls.api_pull_report_section(REPO, 7, "infra", CAP)).json()
        assert section["total"] == CONFIGS
        assert "Storm on shard 0" in client.get(urls.pull(REPO, 7)).text

        rerun = [record(f"c{i:03d}", attempt=3) for i in range(CONFIGS)]
        upload(
            client,
            envelope(
                rerun,
                commit=HEAD,
                branch="feature",
                pull_request=7,
                base_commit=BASE,
                ci_run_id="200",
                ci_attempt=2,
            ),
            token=token,
        )
        after = PullRequestReport.model_validate(client.get(urls.api_pull_report(REPO, 7)).json())
        section = client.get(urls.api_pull_report_section(REPO, 7, "infra", 0)).json()
        page = client.get(urls.pull(REPO, 7)).text
    assert after.storms == []
    assert "infra" not in after.counts.by_verdict
    assert sum(after.counts.by_verdict.values()) == CONFIGS
    assert after.counts.results == 3 * CONFIGS  # both attempts: crashed twice, then passed
    assert section["total"] == 0
    assert "Storm on shard" not in page


def test_a_pr_upload_builds_its_report_before_answering(
    engine: Engine, db_url: str, token: str
) -> None:
    """The first report read after an upload finds the head (160,000 rows at 80,000 configs)
    and the base already read: the upload built them before it answered. A branch upload
    builds no PR's head."""
    app = storm_service(engine, db_url)
    cache: ShardCache = app.state.shard_cache
    with serve(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        seed_storm(client, token, "crashed", NCCL)
        assert cache.counts("pull_head") == KindCounts(loads=1)
        assert cache.counts("results_by_leg") == KindCounts(loads=1)  # the base's
        report = PullRequestReport.model_validate(client.get(urls.api_pull_report(REPO, 7)).json())
        assert client.get(urls.pull(REPO, 7)).status_code == 200
        section = client.get(urls.api_pull_report_section(REPO, 7, "infra", CAP))
        assert section.json()["total"] == CONFIGS
    assert report.total("infra") == CONFIGS
    assert cache.counts("pull_head") == KindCounts(hits=3, loads=1)  # not read again
    assert cache.counts("results_by_leg") == KindCounts(hits=3, loads=1)
    # No config passed at head, so none is timed: the base branch's timings were never read.
    assert cache.counts("passed_durations_by_leg") == KindCounts()


def test_without_the_warm_step_two_first_reads_at_once_read_the_head_once(
    engine: Engine, db_url: str, token: str
) -> None:
    """CPCI_WARM_PULL_REPORTS=false: the first read loads the head; a second read arriving
    while it does waits for that load (held until it waits), and both answer the same."""
    app = storm_service(engine, db_url, warm_pull_reports=False)
    heard = Sequenced("pull_head")
    app.state.shard_cache = cache = ShardCache(listener=heard)

    def read(url: str) -> bytes:
        with httpx.Client(base_url=url, timeout=60) as client:
            response = client.get(urls.api_pull_report(REPO, 7))
            assert response.status_code == 200, response.text
            return response.content

    with serve(app) as url:
        with httpx.Client(base_url=url, timeout=60) as client:
            seed_storm(client, token, "crashed", NCCL)
        assert cache.counts("pull_head") == KindCounts()  # nothing warmed
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(read, url)
            assert heard.loading.wait(timeout=30)
            second = pool.submit(read, url)
            one, other = first.result(timeout=60), second.result(timeout=60)
    assert PullRequestReport.model_validate_json(one).total("infra") == CONFIGS
    assert one == other
    assert heard.events == ["load", "wait", "hit"]
    assert cache.counts("pull_head") == KindCounts(hits=1, loads=1, waits=1)


def test_only_the_upload_that_completes_the_head_builds_it(
    engine: Engine, db_url: str, token: str
) -> None:
    """Shard 0 of 2 builds nothing (a head read after each shard would read a growing head N
    times); shard 1 completes the run and builds the report of both before it answers."""
    app = storm_service(engine, db_url)
    cache: ShardCache = app.state.shard_cache
    pr = {
        "commit": HEAD,
        "branch": "feature",
        "pull_request": 7,
        "base_commit": BASE,
        "ci_run_id": "200",
    }
    with serve(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        upload(client, envelope([record("c000"), record("c001")]), token=token)
        for index in (0, 1):
            head = [record(f"c00{index}", "failed", message="AssertionError: 0.5 > 0.01")]
            upload(client, envelope(head, shard_index=index, shard_total=2, **pr), token=token)
            assert cache.counts("pull_head").loads == index
        report = PullRequestReport.model_validate(client.get(urls.api_pull_report(REPO, 7)).json())
    assert [v.config for v in report.new_failures] == [config("c000"), config("c001")]
    assert report.shards.complete
    assert cache.counts("pull_head") == KindCounts(hits=1, loads=1)
