"""cpci's pytest hooks. Behaviour lives in the modules these hooks call.

Loaded through the `pytest11` entry point. In the parent pytest process the hooks plan, schedule
and report; inside a rank (see `cpci.runner.rank.worker`) only the marker and the fixture matter.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from cpci.runner import hookspecs
from cpci.runner.launch.fork_rank import fit_for_forks
from cpci.runner.parent.beside_xdist import handed_over_durations
from cpci.runner.parent.markers import MARKER_HELP
from cpci.runner.parent.pytest_reports import FLAKY_ATTR
from cpci.runner.parent.session import ParentSession
from cpci.runner.parent.testcases import mark_harness_items
from cpci.runner.rank.dist import DistContext
from cpci.runner.rank.plugin import DIST_CONTEXT, RankPlugin
from cpci.runner.rank.testcase_adapter import TestcaseAdapter, link_factory
from cpci.runner.settings import add_options, resolve

SESSION = pytest.StashKey[ParentSession]()
#: Harness tests left to their own spawn under --cpci-testcases=shared, with the reason.
OWN_SPAWN = pytest.StashKey[list[str]]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests() -> None:
    # Before any conftest or test module can call torch.cuda.is_available(): ranks are forked
    # from this process, or from one that imports what it imports.
    fit_for_forks()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    if any(isinstance(p, RankPlugin) for p in config.pluginmanager.get_plugins()):
        # Inside a rank: the parent already planned everything; harness tests need their adapter.
        config.pluginmanager.register(TestcaseAdapter(link_factory(config)), "cpci-testcases")
        return
    config.stash[SESSION] = ParentSession(config, resolve(config))


def _session(config: pytest.Config) -> ParentSession | None:
    return config.stash.get(SESSION, None)


def pytest_sessionstart(session: pytest.Session) -> None:
    parent = _session(session.config)
    if parent is not None:  # the parent, not a rank
        parent.start_early()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    session = _session(config)
    if session is None:
        return
    if session.settings.testcases == "shared":
        config.stash[OWN_SPAWN] = mark_harness_items(items)
    session.plan_items(items)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    parent = _session(session.config)
    if parent is None or session.config.option.collectonly:
        return None
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        return None  # pytest's own loop stops on collection errors; start no world for nothing
    if parent.settings.plan_only:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        own_spawn = session.config.stash.get(OWN_SPAWN, [])
        lines = [
            *parent.plan.lines(parent.settings),
            *(f"  own spawn (not in a world): {n}" for n in own_spawn),
        ]
        for line in lines:
            reporter.write_line(line) if reporter is not None else print(line)
        return True
    parent.start()
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> bool | None:
    session = _session(item.config)
    if session is None or not session.owns(item):
        return None
    session.report_item(item)
    return True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item,
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    # Only tests that run in this process get here: the unmarked ones.
    report = yield
    session = _session(item.config)
    if session is not None:
        session.record_plain(report)
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report: pytest.TestReport) -> tuple[str, str, str] | None:
    if getattr(report, FLAKY_ATTR, False) and report.when == "call":
        return "flaky", "K", "FLAKY"
    return None


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    session = _session(config)
    if session is None or session.settings.plan_only:
        return
    lines = session.summary_lines()
    if lines:
        terminalreporter.section("cpci")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    # pytest-xdist's controller, as each worker ends: keep its durations with the others'.
    session = _session(node.config)
    if session is not None:
        session.durations.record_all(handed_over_durations(node))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    parent = _session(session.config)
    if parent is not None:
        parent.finish()


@pytest.fixture
def cpci_dist(request: pytest.FixtureRequest) -> DistContext:
    """The rank's view of its world (rank, world_size, device, new_group, record_metric).

    Only available in tests marked `@pytest.mark.cpci(world_size=N)`, which run on every rank.
    """
    context = request.config.stash.get(DIST_CONTEXT, None)
    if context is None:
        pytest.fail("cpci_dist needs @pytest.mark.cpci(world_size=N) on the test", pytrace=False)
    return context
