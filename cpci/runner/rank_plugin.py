"""The pytest plugin inside each rank: runs the world's configs in plan order, one at a time.

Every rank runs the same pytest items with the real pytest protocol (fixtures, skip/xfail marks,
captured output all behave as usual). Around each config a rank journals begin/end, resets state
(`cpci.runner.config_state`, then the suite's `pytest_cpci_reset` hooks), then takes part in the
agreement: an all_reduce(MIN) of "did I pass" on a private gloo group, then a gather of each
rank's reports to rank 0, which appends the agreed record to the world's outcomes file.
Test code cannot disturb the agreement: it runs on its own group.
"""

from __future__ import annotations

import time
import traceback
from typing import Any

import pytest

from cpci.runner.agreement import agreed_record, local_outcome, passed
from cpci.runner.config_state import ConfigState
from cpci.runner.dist import DistContext
from cpci.runner.journal import JournalWriter
from cpci.runner.protocol import Begin, End, PlanEntry, RankPayload, WorldPlan
from cpci.runner.rank_errors import rank_error

DIST_CONTEXT = pytest.StashKey[DistContext]()


class RankPlugin:
    """Registered in each rank's in-process pytest session; not used in the parent."""

    def __init__(
        self,
        *,
        plan: WorldPlan,
        journal: JournalWriter,
        agreed_file: JournalWriter | None,
        context: DistContext,
        control_group: Any,
    ) -> None:
        self._plan = plan.configs
        self._journal = journal
        self._agreed_file = agreed_file
        self._context = context
        self._group = control_group
        self._items: dict[str, pytest.Item] = {}
        self._reports: list[pytest.TestReport] = []
        self._collect_errors: list[str] = []
        self._config: pytest.Config | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        self._config = config
        config.stash[DIST_CONTEXT] = self._context
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
        self._items = {item.nodeid: item for item in items}
        wanted = [entry.nodeid for entry in self._plan]
        items[:] = [self._items[n] for n in wanted if n in self._items]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._reports.append(report)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        for position, entry in enumerate(self._plan):
            following = self._plan[position + 1 :]
            nextitem = next(
                (self._items[e.nodeid] for e in following if e.nodeid in self._items), None
            )
            self._run_config(entry, self._items.get(entry.nodeid), nextitem)
        return True

    def _run_config(
        self, entry: PlanEntry, item: pytest.Item | None, nextitem: pytest.Item | None
    ) -> None:
        started = time.time()
        self._journal.write(Begin(index=entry.index, t=started))
        self._reports = []
        self._context.metrics = {}
        if item is None:
            payload = self._not_collected(entry.nodeid)
            failed_t: float | None = time.time()
        else:
            with ConfigState(entry.nodeid):
                item.ihook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            self._reset(item)
            payload = self._payload()
            failed_t = min((r.stop for r in self._reports if r.failed), default=None)
        end = End(
            index=entry.index,
            t=time.time(),
            outcome=payload.outcome,
            errors=payload.errors,
            failed_t=failed_t,
        )
        self._journal.write(end)
        self._agree(entry.index, payload, started)

    def _reset(self, item: pytest.Item) -> None:
        """Run the suite's `pytest_cpci_reset` hooks; a failure is a teardown error of `item`."""
        assert self._config is not None
        started = time.time()
        try:
            self._config.hook.pytest_cpci_reset(config_nodeid=item.nodeid)
        except Exception:
            text = f"pytest_cpci_reset failed after {item.nodeid}:\n{traceback.format_exc()}"
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
            item.ihook.pytest_runtest_logreport(report=report)  # recorded like any report

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
        import torch
        import torch.distributed as dist

        ok = torch.tensor([1 if passed(payload.outcome) else 0], dtype=torch.int32)
        dist.all_reduce(ok, op=dist.ReduceOp.MIN, group=self._group)
        rank = self._context.rank
        gathered: list[Any] | None = [None] * self._context.world_size if rank == 0 else None
        dist.gather_object(payload, gathered, dst=0, group=self._group)
        if rank != 0 or self._agreed_file is None:
            return
        assert gathered is not None
        record = agreed_record(
            index,
            gathered,
            all_passed=bool(ok.item()),
            duration_s=time.time() - started,
        )
        self._agreed_file.write(record)
