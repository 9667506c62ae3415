"""The parent's side of one pytest session: plan at collection, start the worlds, report in turn.

`ParentSession` is what the hooks in `cpci.runner.plugin` call. It plans with `plan_session`
(`cpci.runner.parent.session_plan`), balancing shards by the session's `Durations`; starts the
launcher (early, beside collection, where the pytest process will not be fit to fork) and the
scheduler, with the rerun policy its evidence (`RunEvidence`, read once beside the durations)
decides by; receives every attempt record the scheduler sends (the results line at once, the
final one kept for pytest); and reports each config when pytest reaches its item, printing
progress while it waits.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from cpci.runner.launch import launcher, zygote
from cpci.runner.launch.preload_targets import early_targets
from cpci.runner.parent import beside_xdist, sharding
from cpci.runner.parent.attempt_records import AttemptRecord, Where, of_not_run, skipped_record
from cpci.runner.parent.durations import Durations
from cpci.runner.parent.evidence import SUFFIX, RunEvidence
from cpci.runner.parent.launched_world import world_starter
from cpci.runner.parent.planning import ConfigSpec
from cpci.runner.parent.progress import RunStats
from cpci.runner.parent.pytest_reports import item_reports, skipped_reports, synthesized
from cpci.runner.parent.rerun_policy import ArrivalBudget, RerunPolicy
from cpci.runner.parent.results_file import ResultsFile
from cpci.runner.parent.scheduler import Scheduler
from cpci.runner.parent.session_plan import SessionPlan, plan_session
from cpci.runner.parent.slots import Slots
from cpci.runner.parent.world_launch import WorldLaunch
from cpci.runner.settings import RunnerSettings
from cpci.runner.wire.agreement import local_outcome
from cpci.schema import ResultRecord, plan_path

#: How long worlds that are closing when the session ends get to end on their own (then killed).
_CLOSING_GRACE_S = 10.0


class ParentSession:
    """One pytest session's run in worlds; its methods are called from the hooks in plugin.py."""

    def __init__(self, config: pytest.Config, settings: RunnerSettings) -> None:
        self.config = config
        self.settings = settings
        cache: pytest.Cache | None = getattr(config, "cache", None)
        self.durations = Durations.load(settings.durations, cache)
        self.evidence = RunEvidence.load(
            settings.evidence, _evidence_kept_at(settings, cache), settings.changed_files
        )
        self.plan = SessionPlan()
        self.stats = RunStats()
        self._results = ResultsFile(settings.results) if settings.results else None
        self._final: dict[str, AttemptRecord] = {}
        self._arrived = threading.Condition()
        self._scheduler: Scheduler | None = None
        self._run_dir: Path | None = None
        self.launcher: launcher.Launcher | None = None  # made early when it can be (fork)
        self._plain: dict[str, list[pytest.TestReport]] = {}

    # -- collection ----------------------------------------------------------------------------
    def plan_items(self, items: list[pytest.Item]) -> None:
        """Plan the collected items (`plan_session`): keep this shard's, in the plan's order,
        and write the shard plan beside the results file."""
        self.plan = plan = plan_session(
            items, self.settings, self.durations, cannot_run=beside_xdist.refusal(self.config)
        )
        if self.settings.results is not None and plan.shard_plan is not None:
            sharding.write_plan(Path(plan_path(str(self.settings.results))), plan.shard_plan)
        if plan.deselected:
            self.config.hook.pytest_deselected(items=plan.deselected)
        items[:] = plan.items
        self.stats.planned(len(plan.specs))

    # -- running -------------------------------------------------------------------------------
    def start_early(self) -> None:
        """Where this process will not be fit to fork once collection is over (another thread
        already runs in it: see `zygote.unfit_reason`), start the fork launcher's server now,
        with the command line's test files, so that its preload runs beside the parent's
        collection (not under --collect-only or --cpci-plan, nor when the named files hold no
        config: see `preload_targets`)."""
        if self.settings.launcher != "fork" or self.settings.plan_only:
            return
        if beside_xdist.is_xdist_controller(self.config):
            return  # it collects nothing: xdist's workers do
        if self.config.option.collectonly or zygote.unfit_reason() is None:
            return
        targets = early_targets(self.config, harness_tests=self.settings.testcases == "shared")
        if targets is None:
            return
        self._run_dir = Path(tempfile.mkdtemp(prefix="cpci-run-"))
        self.launcher = launcher.for_session(
            self.config, "fork", targets.files, self._run_dir, conftest_dirs=targets.dirs
        )

    def start(self) -> None:
        plan = self.plan
        if not plan.groups:
            return
        if self._run_dir is None:
            self._run_dir = Path(tempfile.mkdtemp(prefix="cpci-run-"))
        # What collection made (torch, the suite, its items) lives as long as the session: out of
        # the cycle collector's full passes, which rescan it all (pytest's own at its end, with
        # torch loaded: a fifth of a second), and shared, not copied, by a fork of this process.
        gc.freeze()
        config_files = [spec.path for spec in plan.specs.values()]
        if self.launcher is None:  # before the scheduler's threads: this process may fork
            self.launcher = launcher.for_session(
                self.config, self.settings.launcher, config_files, self._run_dir, collected=True
            )
        launch = WorldLaunch.of_session(
            self.config,
            config_files=config_files,
            run_dir=self._run_dir,
            launcher=self.launcher,
            start_timeout_s=max(120.0, self.settings.timeout),
        )
        self._scheduler = Scheduler(
            plan.groups,
            start_world=world_starter(launch),
            slots=Slots(plan.devices, cores=os.cpu_count() or 1),
            workers=self.settings.workers,
            world_cap=self.settings.world_cap,
            max_respawns=self.settings.max_respawns,
            policy=self._rerun_policy(),
            sink=self._receive,
            stats=self.stats,
            ended=self._wake,
        )
        self._scheduler.start()

    def _rerun_policy(self) -> RerunPolicy:
        settings = self.settings
        budget = ArrivalBudget(settings.new_config_share, self.stats.configs_s)
        return RerunPolicy(
            reruns=settings.reruns,
            isolate=settings.isolate_failures,
            mode=settings.reruns_policy,
            evidence=self.evidence,
            new_config_runs=settings.new_config_runs,
            arrival_budget=budget,
            bisect_time=settings.bisect_time,
        )

    def _receive(self, sent: AttemptRecord) -> None:
        """An attempt the scheduler sent: its results line now, and a final one for pytest."""
        if self._results is not None and not sent.recorded:
            self._results.append(sent.result)
        if not sent.final:
            return
        self.stats.settled(sent.spec.nodeid, sent.result.outcome)
        with self._arrived:
            self._final[sent.spec.nodeid] = sent
            self._arrived.notify_all()

    # -- reporting -----------------------------------------------------------------------------
    def owns(self, item: pytest.Item) -> bool:
        return self.plan.owns(item.nodeid)

    def report_item(self, item: pytest.Item) -> None:
        """Wait for the config's final record (printing progress meanwhile) and report it."""
        plan = self.plan
        if item.nodeid in plan.errors:
            reports = synthesized(item, "error", plan.errors[item.nodeid], 0.0)
        elif item.nodeid in plan.skipped:
            spec, reason = plan.skipped[item.nodeid]
            reports = skipped_reports(item, reason)
            if self._results is not None:
                self._results.append(skipped_record(spec))
        else:
            final = self._wait(item.nodeid)
            reports = item_reports(item, final)
            self.durations.record(item.nodeid, final.result.duration_s)
        hook = item.ihook
        hook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        for report in reports:
            hook.pytest_runtest_logreport(report=report)
        hook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)

    def _wake(self) -> None:
        with self._arrived:
            self._arrived.notify_all()

    def _wait(self, nodeid: str) -> AttemptRecord:
        """The config's final record, once it arrives; never waits on a scheduler whose threads
        have all ended (settling a config failed): the config is then reported `not_run`."""
        assert self._scheduler is not None, "configs are reported after start()"
        scheduler = self._scheduler
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        interval = self.settings.progress_interval
        with self._arrived:
            while nodeid not in self._final:
                arrived = self._arrived.wait_for(
                    lambda: nodeid in self._final or scheduler.finished(), timeout=interval
                )
                if nodeid not in self._final and scheduler.finished():
                    return self._stranded(self.plan.specs[nodeid], scheduler.error)
                if not arrived and reporter is not None:
                    flights = scheduler.in_flight()
                    reporter.write_line(self.stats.progress_line(flights, stalled_s=interval))
            return self._final.pop(nodeid)

    def _stranded(self, spec: ConfigSpec, error: str | None) -> AttemptRecord:
        """A config the scheduler ended without settling: `not_run`, with what ended it; its
        record goes to the results file if the file takes it (the file may be what failed)."""
        last = (error or "").strip().splitlines()[-1:]
        why = "cpci's scheduler stopped before this config had a record" + "".join(
            f" ({line})" for line in last
        )
        never = of_not_run(spec, why, error or "", Where(1, spec.backend, batch=None))
        note = None
        if self._results is not None:
            try:
                self._results.append(never.result)
            except OSError as exc:
                note = f"its record could not be written to {self._results.path} either: {exc}"
        self.stats.settled(spec.nodeid, never.result.outcome)
        return replace(never, final=True, note=note)

    def record_plain(self, report: pytest.TestReport) -> None:
        """Durations and results records for unmarked tests (they run in the parent)."""
        self._plain.setdefault(report.nodeid, []).append(report)
        if report.when != "teardown":
            return
        reports = self._plain.pop(report.nodeid)
        self.durations.record(report.nodeid, sum(r.duration for r in reports))
        if self._results is None:
            return
        self._results.append(
            ResultRecord(
                nodeid=report.nodeid,
                world_size=1,
                outcome=local_outcome(reports),
                duration_s=sum(r.duration for r in reports),
            )
        )

    def summary_lines(self) -> list[str]:
        lines = self.stats.summary_lines() if self._scheduler is not None else []
        if self._scheduler is not None and (said := self.evidence.describe()):
            lines.append(said)
        if self._scheduler is not None and self.launcher is not None:
            lines.append(self.launcher.describe())
        if self._results is not None:
            lines.append(f"results: {self._results.path}")
        return lines

    def finish(self) -> None:
        if self._scheduler is not None:
            closing = self.stats.all_settled()  # not cut short
            self._scheduler.stop(grace_s=_CLOSING_GRACE_S if closing else 0.0)
        if self.launcher is not None:
            self.launcher.close()
        if self._results is not None:
            self._results.close()
        if beside_xdist.is_xdist_worker(self.config):
            beside_xdist.hand_over_durations(self.config, self.durations.recorded)
        elif not self.settings.plan_only:
            self.durations.save()
        if self._run_dir is not None and not self.settings.keep_worlds:
            shutil.rmtree(self._run_dir, ignore_errors=True)


def _evidence_kept_at(settings: RunnerSettings, cache: pytest.Cache | None) -> Path | None:
    """Where a fetched evidence summary is kept: beside the results file, else in pytest's
    cache dir (None: neither, so it is not kept)."""
    if settings.results is not None:
        return Path(str(settings.results) + SUFFIX)
    return cache.mkdir("cpci") / "evidence.json" if cache is not None else None
