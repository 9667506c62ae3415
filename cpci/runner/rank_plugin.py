"""The pytest plugin inside each rank: runs the world's configs in plan order, one at a time.

Every rank runs the same pytest items with the real pytest protocol (fixtures, skip/xfail marks,
captured output all behave as usual). Around each config a rank journals begin/end, resets state,
then takes part in the agreement: an all_reduce(MIN) of "did I pass" on a private gloo group,
then a gather of each rank's reports to rank 0, which appends the agreed record to the world's
outcomes file. Test code cannot disturb the agreement: it runs on its own group.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from cpci.runner import outcome as outcomes
from cpci.runner.dist import DistContext
from cpci.runner.journal import JournalWriter
from cpci.runner.state import ConfigState

DIST_CONTEXT = pytest.StashKey[DistContext]()


class RankPlugin:
    """Registered in each rank's in-process pytest session; not used in the parent."""

    def __init__(
        self,
        *,
        plan: list[dict[str, Any]],
        journal: JournalWriter,
        outcomes_file: JournalWriter | None,
        context: DistContext,
        control_group: Any,
    ) -> None:
        self._plan = plan
        self._journal = journal
        self._outcomes = outcomes_file
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
        wanted = [c["nodeid"] for c in self._plan]
        items[:] = [self._items[n] for n in wanted if n in self._items]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._reports.append(report)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        for position, config in enumerate(self._plan):
            item = self._items.get(config["nodeid"])
            following = self._plan[position + 1 :]
            nextitem = next(
                (self._items[c["nodeid"]] for c in following if c["nodeid"] in self._items), None
            )
            self._run_config(config["index"], config["nodeid"], item, nextitem)
        return True

    def _run_config(
        self, index: int, nodeid: str, item: pytest.Item | None, nextitem: pytest.Item | None
    ) -> None:
        started = time.time()
        self._journal.write({"ev": "begin", "i": index, "t": started})
        self._reports = []
        self._context.metrics = {}
        if item is None:
            local = "error"
            payload = self._not_collected(nodeid)
            failed_t: float | None = time.time()
        else:
            with ConfigState(nodeid):
                item.ihook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            local = outcomes.local_outcome(self._reports)
            payload = self._payload(local)
            failed_t = min((r.stop for r in self._reports if r.failed), default=None)
        # The local errors ride along in the journal: if another rank then hangs, the parent can
        # still show why this one failed. `failed_t` (when this rank's first failing phase ended)
        # lets the parent put the rank that failed first at the head of the record.
        end = {
            "ev": "end",
            "i": index,
            "t": time.time(),
            "outcome": local,
            "errors": payload["errors"],
            "failed_t": failed_t,
        }
        self._journal.write(end)
        self._agree(index, payload, started)

    def _payload(self, local: str) -> dict[str, Any]:
        assert self._config is not None
        hook = self._config.hook
        reports = [
            hook.pytest_report_to_serializable(config=self._config, report=r) for r in self._reports
        ]
        errors = [
            {
                "rank": self._context.rank,
                "phase": r.when,
                "message": outcomes.first_line(r.longreprtext),
                "detail": r.longreprtext,
            }
            for r in self._reports
            if r.failed
        ]
        return {
            "rank": self._context.rank,
            "outcome": local,
            "reports": reports,
            "errors": errors,
            "metrics": self._context.metrics,
        }

    def _not_collected(self, nodeid: str) -> dict[str, Any]:
        why = (
            "\n".join(self._collect_errors)
            or "no such test in this process (is its parametrization deterministic?)"
        )
        text = f"{nodeid} was not collected inside the world: {why}"
        error = {
            "rank": self._context.rank,
            "phase": "setup",
            "message": outcomes.first_line(text),
            "detail": text,
        }
        return {
            "rank": self._context.rank,
            "outcome": "error",
            "reports": [],
            "errors": [error],
            "metrics": {},
        }

    def _agree(self, index: int, payload: dict[str, Any], started: float) -> None:
        import torch
        import torch.distributed as dist

        ok = torch.tensor([0 if payload["outcome"] in outcomes.FAILING else 1], dtype=torch.int32)
        dist.all_reduce(ok, op=dist.ReduceOp.MIN, group=self._group)
        rank = self._context.rank
        gathered: list[Any] | None = [None] * self._context.world_size if rank == 0 else None
        dist.gather_object(payload, gathered, dst=0, group=self._group)
        if rank != 0 or self._outcomes is None:
            return
        assert gathered is not None
        record = _agreed_record(index, gathered, bool(ok.item()), started)
        self._outcomes.write({**record, "backend": self._context.backend})


def _agreed_record(
    index: int, ranks: list[dict[str, Any]], ok: bool, started: float
) -> dict[str, Any]:
    merged = outcomes.merge([r["outcome"] for r in ranks])
    assert ok == (merged not in outcomes.FAILING), "all_reduce and gathered outcomes disagree"
    # Reports shown to the user: rank 0's, or those of the first rank with the agreed outcome.
    shown = (
        next(r for r in ranks if r["outcome"] == merged)
        if merged != ranks[0]["outcome"]
        else ranks[0]
    )
    metrics: dict[str, float] = {}
    for r in ranks:
        for name, value in r["metrics"].items():
            metrics[name] = max(value, metrics.get(name, value))
    return {
        "i": index,
        "outcome": merged,
        "duration_s": time.time() - started,
        "rank_errors": [e for r in ranks for e in r["errors"]],
        "reports": shown["reports"],
        "report_rank": shown["rank"],
        "metrics": metrics,
    }
