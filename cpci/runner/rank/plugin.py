"""The pytest plugin inside each rank: runs the configs of the world's feed, one at a time.

Every rank runs the same pytest items with the real pytest protocol (fixtures, skip/xfail marks,
captured output all behave as usual). Around each config a rank journals begin/end, resets state
(`cpci.runner.rank.config_state`, then the suite's `pytest_cpci_reset` hooks), then takes part in
the agreement (`cpci.runner.rank.control_plane`: every rank's reports reach rank 0 through the
world's store, rank 0 appends the agreed record to the world's outcomes file, then all pass a
barrier). Test code cannot disturb the agreement: it uses no process group. Before each config the
default process group is brought back if a test destroyed it (`cpci.runner.rank.default_group`).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Generator

import pytest

from cpci.runner.rank.config_state import ConfigState
from cpci.runner.rank.control_plane import ControlPlane
from cpci.runner.rank.default_group import DefaultGroup
from cpci.runner.rank.dist import DistContext, metric_problem
from cpci.runner.wire import collectives
from cpci.runner.wire.agreement import local_outcome
from cpci.runner.wire.feed import FeedReader
from cpci.runner.wire.journal import JournalWriter
from cpci.runner.wire.protocol import Begin, End, Left, PlanEntry, RankPayload, WorldPlan
from cpci.runner.wire.rank_errors import rank_error
from cpci.schema import RankError

DIST_CONTEXT = pytest.StashKey[DistContext]()
#: The rank's keeper of the default process group: a config that initialises its own default
#: group calls `config.stash[DEFAULT_GROUP].release()` first; the next config gets it back.
DEFAULT_GROUP = pytest.StashKey[DefaultGroup]()
#: How this rank's part of a torch harness test says it ended, with its errors if it failed
#: (`RankPlugin.left`; `cpci.runner.rank.testcase_adapter` calls it).
LEFT = pytest.StashKey[Callable[[list[RankError]], None]]()


class RankPlugin:
    """Registered in each rank's in-process pytest session; not used in the parent."""

    def __init__(
        self,
        *,
        plan: WorldPlan,
        feed: FeedReader,
        journal: JournalWriter,
        context: DistContext,
        control: ControlPlane,
        default_group: DefaultGroup,
    ) -> None:
        self._plan = plan
        self._feed = feed
        self._journal = journal
        self._context = context
        self._control = control
        self.default_group = default_group
        self._items: dict[str, pytest.Item] = {}
        self._reports: list[pytest.TestReport] = []
        self._collect_errors: list[str] = []
        self._config: pytest.Config | None = None
        self._index: int | None = None  # plan index of the config running
        self._collective: str | None = None  # where the config's first failure was raised

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        self._config = config
        config.stash[DIST_CONTEXT] = self._context
        config.stash[DEFAULT_GROUP] = self.default_group
        config.stash[LEFT] = self.left
        # The parent reports; a rank's own progress dots would only clutter its log. Dropped
        # after option parsing, so that -r and friends from the user's ini are still accepted.
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            config.pluginmanager.unregister(reporter)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._collect_errors.append(f"{report.nodeid}: {report.longreprtext}")

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # Any config of the world's group may be fed: keep every item, run what the feed says.
        self._items = {item.nodeid: item for item in items}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._reports.append(report)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if report.failed and call.excinfo is not None and self._collective is None:
            self._collective = collectives.raised_in(call.excinfo.tb)
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        # The feed gives each entry with the one after it, so fixture teardown between configs
        # is pytest's own (`nextitem`); a feed's last entry tears everything down.
        while (step := self._feed.next()) is not None:
            entry, following = step
            nextitem = None if following is None else self._items.get(following.nodeid)
            self._run_config(entry, self._items.get(entry.nodeid), nextitem)
        return True

    def _run_config(
        self, entry: PlanEntry, item: pytest.Item | None, nextitem: pytest.Item | None
    ) -> None:
        self.default_group.ensure()  # a test before may have destroyed it
        started = time.time()
        self._index = entry.index
        self._journal.write(Begin(index=entry.index, t=started))
        self._reports = []
        self._collective = None
        self._context.metrics = {}
        if item is None:
            payload = self._not_collected(entry.nodeid)
            failed_t: float | None = time.time()
        else:
            with ConfigState(entry.nodeid):
                item.ihook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            self._reset(item)
            self._keep_metrics(item)
            payload = self._payload()
            failed_t = min((r.stop for r in self._reports if r.failed), default=None)
        end = End(
            index=entry.index,
            t=time.time(),
            outcome=payload.outcome,
            errors=payload.errors,
            failed_t=failed_t,
            collective=self._collective,
        )
        self._journal.write(end)
        self._agree(entry.index, payload, started)

    def left(self, errors: list[RankError]) -> None:
        """Journal that this rank's part of the harness test running ended (`Left`), failed with
        `errors` or not, before the rank waits for the others' parts."""
        assert self._index is not None, "a harness test runs inside a config"
        self._journal.write(Left(index=self._index, t=time.time(), errors=errors))

    def _reset(self, item: pytest.Item) -> None:
        """Run the suite's `pytest_cpci_reset` hooks; a failure is a teardown error of `item`."""
        assert self._config is not None
        started = time.time()
        try:
            self._config.hook.pytest_cpci_reset(config_nodeid=item.nodeid)
        except Exception:
            text = f"pytest_cpci_reset failed after {item.nodeid}:\n{traceback.format_exc()}"
            self._teardown_error(item, text, started)

    def _keep_metrics(self, item: pytest.Item) -> None:
        """Drop the metrics the results cannot hold (a test wrote them into `cpci_dist.metrics`
        itself, past `record_metric`'s checks); each one dropped is a teardown error of `item`."""
        problems = [p for n, v in self._context.metrics.items() if (p := metric_problem(n, v))]
        if not problems:
            return
        self._context.metrics = {
            n: v for n, v in self._context.metrics.items() if metric_problem(n, v) is None
        }
        text = f"cpci cannot keep the metrics {item.nodeid} recorded:\n" + "\n".join(problems)
        self._teardown_error(item, text, time.time())

    def _teardown_error(self, item: pytest.Item, text: str, started: float) -> None:
        """Record a failed teardown report of `item`, as pytest records any report."""
        now = time.time()
        report = pytest.TestReport(
            item.nodeid,
            item.location,
            dict.fromkeys(item.keywords, 1),
            "failed",
            text,
            "teardown",
            duration=now - started,
            start=started,
            stop=now,
        )
        item.ihook.pytest_runtest_logreport(report=report)

    def _payload(self) -> RankPayload:
        assert self._config is not None
        hook = self._config.hook
        return RankPayload(
            rank=self._context.rank,
            outcome=local_outcome(self._reports),
            reports=[
                hook.pytest_report_to_serializable(config=self._config, report=r)
                for r in self._reports
            ],
            errors=[
                rank_error(self._context.rank, r.when, r.longreprtext)
                for r in self._reports
                if r.failed
            ],
            metrics=self._context.metrics,
        )

    def _not_collected(self, nodeid: str) -> RankPayload:
        why = (
            "\n".join(self._collect_errors)
            or "no such test in this process (is its parametrization deterministic?)"
        )
        text = f"{nodeid} was not collected inside the world: {why}"
        return RankPayload(
            rank=self._context.rank,
            outcome="error",
            reports=[],
            errors=[rank_error(self._context.rank, "setup", text)],
            metrics={},
        )

    def _agree(self, index: int, payload: RankPayload, started: float) -> None:
        self._control.agree(index, payload, started)
