"""`--cpci-durations URL`: every runner balances by the service's durations, so two runners with
different local caches compute the same plan (their shards cover every test exactly once), and
the plan each writes beside its results carries the same hash. Without the URL, their caches
disagree, and the service's PR report flags the run. Real processes, a real uvicorn."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cpci import urls
from cpci.runner.parent import sharding
from cpci.schema import ResultRecord, RunEnvelope, ShardPlan, plan_path
from cpci.upload.service_client import ServiceClient
from tests.builders import REPO
from tests.live_server import loopback_socket
from tests.upload.support import (
    Database,
    LiveService,
    live_service,
    migrated_database,
    run_cpci,
    upload_args,
)

TESTS = 10
MODULE = "test_balanced.py"


def nodeid(i: int) -> str:
    return f"{MODULE}::test_t[{i}]"


#: What the service recorded: test i took i+1 seconds.
RECORDED = {nodeid(i): float(i + 1) for i in range(TESTS)}
#: Two runners' own caches, each of which has seen other timings.
CACHE_A = {nodeid(i): 1.0 for i in range(TESTS)}
CACHE_B = {nodeid(i): float(TESTS - i) ** 2 for i in range(TESTS)}


@pytest.fixture
def database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    database = migrated_database(tmp_path_factory.mktemp("durations-service"))
    try:
        yield database
    finally:
        database.engine.dispose()


@pytest.fixture
def service(database: Database) -> Iterator[LiveService]:
    """A live service whose main branch recorded `RECORDED`."""
    with live_service(database) as live:
        results = [
            ResultRecord(nodeid=n, world_size=1, outcome="passed", duration_s=s)
            for n, s in RECORDED.items()
        ]
        branch_run = RunEnvelope(
            repository=REPO, commit="a" * 40, branch="main", ci_run_id="1", results=results
        )
        ServiceClient(live.url, live.token).upload(branch_run)
        yield live


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(
        test_balanced=f"""
        import pytest
        @pytest.mark.parametrize("i", range({TESTS}))
        def test_t(i):
            pass
        """
    )
    for name, cache in (("cache_a", CACHE_A), ("cache_b", CACHE_B)):
        folder = pytester.path / name / "v" / "cpci"
        folder.mkdir(parents=True)
        (folder / "durations").write_text(json.dumps(cache))
    return pytester


def _runner(
    suite: pytest.Pytester, shard: str, cache: str, *args: str
) -> tuple[set[str], ShardPlan, str]:
    """One simulated runner: a pytest process with its own cache, collecting its shard."""
    results = suite.path / f"results-{cache}.jsonl"
    ran = suite.runpytest_subprocess(
        "--co",
        "-q",
        "-o",
        f"cache_dir={cache}",
        f"--cpci-shard={shard}",
        f"--cpci-results={results}",
        *args,
    )
    assert ran.ret == 0, ran.stdout.str() + ran.stderr.str()
    kept = {line.strip() for line in ran.stdout.lines if line.startswith(f"{MODULE}::")}
    plan = ShardPlan.model_validate_json(Path(plan_path(str(results))).read_text())
    return kept, plan, ran.stderr.str()


def test_two_runners_with_different_caches_plan_alike_from_the_url(
    suite: pytest.Pytester, service: LiveService
) -> None:
    every = {nodeid(i) for i in range(TESTS)}
    url = service.url + urls.api_durations(REPO)
    first, plan_a, _ = _runner(suite, "0/2", "cache_a", f"--cpci-durations={url}")
    second, plan_b, _ = _runner(suite, "1/2", "cache_b", f"--cpci-durations={url}")
    assert first.isdisjoint(second)
    assert first | second == every
    assert plan_a.plan_hash == plan_b.plan_hash
    assert plan_a.durations_from == url
    assert plan_a.plan_hash == sharding.plan_hash(sorted(every), RECORDED, 2)
    # Balanced by what the service recorded: 55 s in all, so each shard within a test of half.
    loads = [sum(RECORDED[n] for n in part) for part in (first, second)]
    assert abs(loads[0] - loads[1]) <= 1.0
    assert (plan_a.shard_index, plan_b.shard_index, plan_a.shard_total) == (0, 1, 2)


def test_without_the_url_the_caches_disagree_and_the_report_says_so(
    suite: pytest.Pytester, service: LiveService
) -> None:
    first, plan_a, _ = _runner(suite, "0/2", "cache_a")
    second, plan_b, _ = _runner(suite, "1/2", "cache_b")
    every = {nodeid(i) for i in range(TESTS)}
    assert first & second or first | second != every  # the bug the URL fixes
    assert plan_a.plan_hash != plan_b.plan_hash
    assert plan_a.durations_from == "pytest's cache"

    for cache, shard in (("cache_a", "0/2"), ("cache_b", "1/2")):
        results = suite.path / f"results-{cache}.jsonl"
        results.write_text("")  # collected only: an empty shard still carries its plan
        pull = ["--pull-request", "7", "--base-commit", "a" * 40, "--branch", "feature"]
        args = upload_args(service, suite.path, results, "--commit", "b" * 40, "--ci-run-id", "9")
        done = run_cpci(suite.path, *args, "--shard", shard, *pull)
        assert done.returncode == 0, done.stderr
    report = ServiceClient(service.url, service.token).pull_report(REPO, 7)
    assert report is not None
    assert [m.text for m in report.shards.plan_mismatches] == [
        "shards 0/2 and 1/2 were planned from different inputs: configs may have been dropped "
        "or run twice"
    ]


def test_a_url_that_does_not_answer_warns_and_falls_back_to_the_cache(
    suite: pytest.Pytester,
) -> None:
    sock = loopback_socket()  # bound, never listening: connections are refused
    try:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}{urls.api_durations(REPO)}"
        kept, plan, stderr = _runner(suite, "0/2", "cache_a", f"--cpci-durations={url}")
    finally:
        sock.close()
    assert f"no answer from {url}" in stderr
    assert "balancing shards by pytest's cache instead" in stderr
    assert plan.durations_from == "pytest's cache"
    assert plan.plan_hash == sharding.plan_hash(sorted(CACHE_A), CACHE_A, 2)
    assert kept


def test_a_private_service_needs_the_uploaders_token(
    suite: pytest.Pytester, database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cpci.server import Settings, create_app
    from tests.live_server import serve

    app = create_app(
        Settings(database_url=database.url, read_access="token"), engine=database.engine
    )
    with serve(app) as base:
        url = base + urls.api_durations(REPO)
        monkeypatch.delenv("CPCI_TOKEN", raising=False)
        _, plan, stderr = _runner(suite, "0/2", "cache_a", f"--cpci-durations={url}")
        assert "answered 401" in stderr
        assert "set CPCI_TOKEN to a token of the repository" in stderr
        # The repository exists once its token does; with the token the answer is empty
        # (nothing uploaded), which is balance by count on every runner, and says so.
        monkeypatch.setenv("CPCI_TOKEN", database.token)
        _, plan, stderr = _runner(suite, "0/2", "cache_a", f"--cpci-durations={url}")
    assert "warning" not in stderr
    assert plan.durations_from == url
    assert plan.plan_hash == sharding.plan_hash(sorted(CACHE_A), {}, 2)


def test_a_durations_file_from_the_service_reads_like_the_url(
    suite: pytest.Pytester, service: LiveService
) -> None:
    """What the Action writes: the service's answer, verbatim, in a file."""
    answer = ServiceClient(service.url, service.token).durations(REPO)
    path = suite.path / "durations.json"
    path.write_text(answer.model_dump_json(by_alias=True))
    _, plan, _ = _runner(suite, "1/2", "cache_b", f"--cpci-durations={path}")
    assert plan.plan_hash == sharding.plan_hash(sorted(RECORDED), RECORDED, 2)


def test_the_token_goes_only_over_https_or_loopback_and_only_to_cpci_server() -> None:
    from cpci.runner.parent.durations_fetch import token_withheld

    api = urls.api_durations(REPO)
    assert token_withheld(f"https://cpci.example{api}", "") is None
    assert token_withheld(f"http://127.0.0.1:8000{api}", "") is None
    assert "use https" in str(token_withheld(f"http://cpci.example{api}", ""))
    server = "https://cpci.example"
    assert token_withheld(f"{server}{api}", server) is None
    assert "not on CPCI_SERVER" in str(token_withheld(f"https://elsewhere.example{api}", server))


def test_a_redirect_is_refused_and_never_carries_the_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """urllib would follow a redirect with the Authorization header to any host."""
    from http.server import BaseHTTPRequestHandler

    from cpci.runner.parent.durations_fetch import DurationsUnavailable, fetch
    from tests.live_server import serve_handler

    seen: list[str | None] = []

    class Elsewhere(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    with serve_handler(Elsewhere) as elsewhere:

        class Redirects(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(302)
                self.send_header("Location", elsewhere + "/steal")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        with serve_handler(Redirects) as base:
            env = {"CPCI_TOKEN": "secret-token"}
            with pytest.raises(DurationsUnavailable, match="redirected \\(302\\)"):
                fetch(base + urls.api_durations(REPO), env, timeout_s=5)
    assert seen == []
