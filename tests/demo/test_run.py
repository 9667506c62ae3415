"""`cpci demo` end to end, run once for the module (it is the slowest test there is: about a
minute and a half on two cores): the real command, its real service, the real suite; then the
history it left in its SQLite database, read back over real HTTP by a second service on that
database, the way the web UI reads it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from cpci import urls
from cpci.demo.faults import SLOW_S
from cpci.demo.history import FLAKY, HISTORY, MAIN, PR_NUMBER, PULL, REPOSITORY
from cpci.schema import PullRequestReport
from cpci.server import Settings, create_app
from cpci.server.views.read_models import ConfigOverview, Dashboard, FlakyList
from tests.live_server import loopback_socket, serve


@dataclass(frozen=True)
class DemoRun:
    output: str
    #: A service on the database the demo left behind.
    url: str

    def get(self, path: str) -> bytes:
        response = httpx.get(self.url + path, timeout=30)
        response.raise_for_status()
        return response.content


def _free_port() -> int:
    with loopback_socket() as sock:
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoRun]:
    workdir = tmp_path_factory.mktemp("demo") / "work"
    command = [sys.executable, "-m", "cpci", "demo", "--dir", str(workdir), "--no-wait"]
    command += ["--port", str(_free_port())]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    settings = Settings(database_url=f"sqlite:///{workdir / 'cpci.db'}")
    with serve(create_app(settings)) as url:
        yield DemoRun(done.stdout, url)


def test_the_dashboard_shows_main_history_with_a_trend(demo: DemoRun) -> None:
    dashboard = Dashboard.model_validate_json(demo.get(urls.api_dashboard(REPOSITORY)))
    assert dashboard.branch == "main"
    assert [row.run.commit for row in reversed(dashboard.runs)] == [c.sha for c in MAIN]
    flaked = {c.sha for c in MAIN if f"flaky={FLAKY}" in c.faults}
    dips = {row.run.commit for row in dashboard.runs if row.pass_rate != 1.0}
    assert dips == flaked  # the trend dips where the flaky config failed before its rerun
    assert min(row.results for row in dashboard.runs) >= 108  # real runs of (a part of) the suite


def test_the_flaky_list_holds_the_flaky_config_on_same_commit_evidence(demo: DemoRun) -> None:
    listed = FlakyList.model_validate_json(demo.get(urls.api_flaky(REPOSITORY)))
    assert [f.config.split("::")[-1] for f in listed.configs] == [f"{FLAKY}@2"]
    evidence = listed.configs[0].assessment.same_commit
    flaked_at = [c.sha for c in MAIN if f"flaky={FLAKY}" in c.faults]
    assert sorted(e.commit for e in evidence) == sorted(flaked_at)
    dashboard = Dashboard.model_validate_json(demo.get(urls.api_dashboard(REPOSITORY)))
    assert [row.config for row in dashboard.flaky] == [listed.configs[0].config]


def test_the_flaky_configs_timeline_has_a_cell_per_commit(demo: DemoRun) -> None:
    key = FlakyList.model_validate_json(demo.get(urls.api_flaky(REPOSITORY))).configs[0].config
    page = ConfigOverview.model_validate_json(demo.get(urls.api_config(REPOSITORY, key)))
    assert [cell.commit for cell in page.timeline] == [c.sha for c in HISTORY]
    flaked = {c.sha for c in HISTORY if f"flaky={FLAKY}" in c.faults}
    assert {cell.commit for cell in page.timeline if cell.state == "mixed"} == flaked
    # `main~1` ran it slowed down (a lower bound, the fault sleeps): its duration moved.
    slowed = next(c.sha for c in MAIN if f"slow={FLAKY}" in c.faults)
    assert [p.duration_s >= SLOW_S for p in page.points if p.commit == slowed] == [True]
    assert {p.timed_by for p in page.points} == {"start"}  # plotted when the jobs ran


def test_the_pr_report_finds_the_regression_against_main(demo: DemoRun) -> None:
    report = PullRequestReport.model_validate_json(
        demo.get(urls.api_pull_report(REPOSITORY, PR_NUMBER))
    )
    assert report.head_commit == PULL.sha
    new = sorted(f.config.split("::")[-1] for f in report.new_failures)
    assert new == ["test_cp4[p2p-causal-ht-bf16]@4", "test_cp4[p2p-causal-ht-fp32]@4"]


def test_the_output_links_the_pages_and_says_how_long(demo: DemoRun) -> None:
    assert "<!-- cpci:pr-report" in demo.output  # the PR comment
    for path in (urls.dashboard(REPOSITORY), urls.pull(REPOSITORY, PR_NUMBER)):
        assert path in demo.output
    assert f"{urls.dashboard(REPOSITORY)}/config?config=" in demo.output  # a timeline
    assert urls.api_flaky(REPOSITORY) in demo.output
    assert f"dashboard: {len(MAIN)} runs of main" in demo.output
    # A job's line counts configs, not attempts: the subset is 108 configs, reruns apart.
    assert f"{MAIN[1].label} shard 1/1: 108 config(s): 108 passed (1 flaky); 1 rerun(s)" in (
        demo.output
    )
    assert "done in " in demo.output
