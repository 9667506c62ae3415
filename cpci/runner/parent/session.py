"""The parent side of a batched run: plan at collection, schedule, report each config in turn."""

from __future__ import annotations

import gc
import importlib.util
import os
import shutil
import sys
import tempfile
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from cpci.runner.launch import launcher, zygote
from cpci.runner.launch.preload_targets import early_targets
from cpci.runner.parent import durations_fetch, sharding
from cpci.runner.parent.attempt_records import Delivery, Where, of_not_run, skipped_record
from cpci.runner.parent.launched_world import WorldLaunch
from cpci.runner.parent.markers import MARKER, PlanningError
from cpci.runner.parent.planning import ConfigSpec, Group, make_groups, spec_for
from cpci.runner.parent.progress import RunStats
from cpci.runner.parent.pytest_reports import item_reports, skipped_reports, synthesized
from cpci.runner.parent.rerun_policy import RerunPolicy
from cpci.runner.parent.results_file import ResultsFile
from cpci.runner.parent.scheduler import Scheduler
from cpci.runner.parent.skips import SkipConditionError, gpu_skip_reason, mark_skip_reason
from cpci.runner.parent.slots import Slots, visible_devices
from cpci.runner.settings import RunnerSettings
from cpci.runner.wire.agreement import local_outcome
from cpci.runner.wire.protocol import Backend
from cpci.schema import FAILING_OUTCOMES, NOT_RUN_OUTCOMES, ResultRecord, ShardPlan, plan_path

_DURATIONS_CACHE_KEY = "cpci/durations"
#: How long worlds that are closing when the session ends get to end on their own (then killed).
_CLOSING_GRACE_S = 10.0


class BatchedSession:
    """One pytest session's batched run; its methods are called from the hooks in plugin.py."""

    def __init__(self, config: pytest.Config, settings: RunnerSettings) -> None:
        self.config = config
        self.settings = settings
        self.specs: dict[str, ConfigSpec] = {}
        self.plan_errors: dict[str, str] = {}
        self.skipped: dict[str, tuple[ConfigSpec, str]] = {}  # node id -> (spec, skip reason)
        self.groups: list[Group] = []
        self.durations_from = "pytest's cache"
        self.durations = self._load_durations()
        self.shard_plan: ShardPlan | None = None
        self.stats = RunStats(total=0)
        self._results = ResultsFile(settings.results) if settings.results else None
        self._final: dict[str, Delivery] = {}
        self._arrived = threading.Condition()
        self._scheduler: Scheduler | None = None
        self._run_dir: Path | None = None
        self.launcher: launcher.Launcher | None = None  # made early when it can be (fork)
        self._plain: dict[str, list[pytest.TestReport]] = {}
        self.devices: list[str] = []  # the GPUs worlds are spread over, by their visible names

    # -- collection ----------------------------------------------------------------------------
    def plan(self, items: list[pytest.Item]) -> None:
        """Shard, then turn marked items into configs and groups; nothing runs here."""
        self._record_shard_plan([i.nodeid for i in items])
        if self.settings.shard is not None:
            index, total = self.settings.shard
            shard_of = sharding.assign([i.nodeid for i in items], self.durations, total)
            kept = [i for i in items if shard_of[i.nodeid] == index]
            dropped = [i for i in items if shard_of[i.nodeid] != index]
            if dropped:
                self.config.hook.pytest_deselected(items=dropped)
            items[:] = kept
        torch_missing = importlib.util.find_spec("torch") is None
        if any(item.get_closest_marker(MARKER) for item in items):  # else torch stays unloaded
            count = self.settings.gpus
            if count is None:
                count = _visible_gpus(self.settings.backend)
            self.devices = visible_devices(os.environ, count)
        setting = self.settings.backend
        backend: Backend = ("nccl" if self.devices else "gloo") if setting == "auto" else setting
        plain: list[pytest.Item] = []
        configs: list[pytest.Item] = []
        for item in items:
            try:
                spec = spec_for(
                    item,
                    default_timeout=self.settings.timeout,
                    timeout_from=self.settings.timeout_from,
                    backend=backend,
                )
                skipped = None if spec is None else self._skip_reason(item, spec)
            except (PlanningError, SkipConditionError) as exc:
                self.plan_errors[item.nodeid] = str(exc)
                configs.append(item)
                continue
            if spec is None:
                plain.append(item)
            elif skipped is not None:
                self.skipped[item.nodeid] = (spec, skipped)
                configs.append(item)
            elif torch_missing:
                self.plan_errors[item.nodeid] = (
                    "torch is not installed: @pytest.mark.cpci tests need it "
                    "(pip install 'cpci[runner]', or your own torch build)"
                )
                configs.append(item)
            else:
                self.specs[item.nodeid] = spec
                configs.append(item)
        self.groups = make_groups(list(self.specs.values()))
        order = {c.nodeid: n for n, c in enumerate(c for g in self.groups for c in g.configs)}
        configs.sort(key=lambda i: order.get(i.nodeid, -1))
        items[:] = plain + configs
        self.stats.total = len(self.specs)

    def _skip_reason(self, item: pytest.Item, spec: ConfigSpec) -> str | None:
        """Why the config is skipped before planning (it then never occupies a world)."""
        reason = mark_skip_reason(item)
        return reason if reason is not None else gpu_skip_reason(spec.world_size, len(self.devices))

    def plan_lines(self) -> list[str]:
        shard = (
            "" if self.settings.shard is None else " in shard {}/{}".format(*self.settings.shard)
        )
        cap = self.settings.world_cap
        lines = [
            f"cpci plan{shard}: {len(self.specs)} config(s) in {len(self.groups)} group(s) by "
            f"world size and backend (a queue each), up to {self.settings.workers} world(s) at "
            "once, "
            + ("no cap on configs per world" if cap is None else f"at most {cap} per world")
        ]
        for group in self.groups:
            worlds = "" if cap is None else f" (at least {-(-len(group.configs) // cap)} worlds)"
            lines.append(
                f"  group {group.index}: world_size={group.world_size} backend={group.backend} "
                f"configs={len(group.configs)}{worlds}"
            )
            lines.extend(
                f"    {c.nodeid}  timeout {c.timeout:g} s ({c.timeout_from})" for c in group.configs
            )
        if self.shard_plan is not None:
            lines.append(f"  {_plan_text(self.shard_plan)}")
        if self.skipped:
            lines.append(f"  {len(self.skipped)} skipped before planning (no world):")
            lines.extend(f"    {n}: {why}" for n, (_, why) in self.skipped.items())
        lines.extend(f"  not runnable: {n}: {why}" for n, why in self.plan_errors.items())
        return lines

    # -- running -------------------------------------------------------------------------------
    def start_early(self) -> None:
        """Where this process will not be fit to fork once collection is over (another thread
        already runs in it: see `zygote.unfit_reason`), start the fork launcher's server now,
        with the command line's test files, so that its preload runs beside the parent's
        collection (not under --collect-only or --cpci-plan, nor when the named files hold no
        config: see `preload_targets`)."""
        if self.settings.launcher != "fork" or self.settings.plan_only:
            return
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
        if not self.groups:
            return
        if self._run_dir is None:
            self._run_dir = Path(tempfile.mkdtemp(prefix="cpci-run-"))
        # What collection made (torch, the suite, its items) lives as long as the session: out of
        # the cycle collector's full passes, which rescan it all (pytest's own at its end, with
        # torch loaded: a fifth of a second), and shared, not copied, by a fork of this process.
        gc.freeze()
        if self.launcher is None:  # before the scheduler's threads: this process may fork
            self.launcher = launcher.for_session(
                self.config,
                self.settings.launcher,
                [spec.path for spec in self.specs.values()],
                self._run_dir,
                collected=True,
            )
        launch = WorldLaunch(
            run_dir=self._run_dir,
            pytest_args=self._worker_args(),
            invocation_dir=str(self.config.invocation_params.dir),
            collect_args=self._collect_args(),
            start_timeout_s=max(120.0, self.settings.timeout),
            launcher=self.launcher,
        )
        self._scheduler = Scheduler(
            self.groups,
            launch=launch,
            slots=Slots(self.devices, cores=os.cpu_count() or 1),
            workers=self.settings.workers,
            cap=self.settings.world_cap,
            max_respawns=self.settings.max_respawns,
            policy=RerunPolicy(reruns=self.settings.reruns, isolate=self.settings.isolate_failures),
            deliver=self._deliver,
            stats=self.stats,
            ended=self._wake,
        )
        self._scheduler.start()

    def _collect_args(self) -> list[str] | None:
        """None when the ranks may collect just the configs' files (their node ids are paths
        under the rootdir); else the parent's own arguments, e.g. `--pyargs pkg` run from
        outside the rootdir, where pytest names files relative to the argument instead."""
        root = self.config.rootpath
        if all(Path(spec.path).is_relative_to(root) for spec in self.specs.values()):
            return None
        return [*(["--pyargs"] if self.config.option.pyargs else []), *self.config.args]

    def _worker_args(self) -> list[str]:
        """The parent's pytest options that shape collection, minus output and caching."""
        option = self.config.option
        args = [
            f"--rootdir={self.config.rootpath}",
            "-p",
            "no:cacheprovider",
            # The rank imported cpci before pytest started; its own modules need no rewriting.
            "-W",
            "ignore::pytest.PytestAssertRewriteWarning",
        ]
        if self.config.inipath:
            args.append(f"--config-file={self.config.inipath}")
        for plugin in option.plugins or []:
            args += ["-p", plugin]
        for override in option.override_ini or []:
            args += ["-o", override]
        if getattr(option, "importmode", None):
            args.append(f"--import-mode={option.importmode}")
        # tee-sys: reports still carry each config's output, and the rank's log keeps a copy, so
        # the last words of a config that kills its process are not lost with it.
        args.append("--capture=no" if option.capture == "no" else "--capture=tee-sys")
        return args

    def _deliver(self, sent: Delivery) -> None:
        if self._results is not None and not sent.recorded:
            self._results.append(sent.record)
        if not sent.final:
            return
        outcome = sent.record.outcome
        with self.stats.lock:
            self.stats.done += 1
            if outcome in NOT_RUN_OUTCOMES:
                self.stats.not_run.append(sent.spec.nodeid)
            elif outcome in FAILING_OUTCOMES:
                self.stats.failed += 1
        with self._arrived:
            self._final[sent.spec.nodeid] = sent
            self._arrived.notify_all()

    # -- reporting -----------------------------------------------------------------------------
    def owns(self, item: pytest.Item) -> bool:
        return (
            item.nodeid in self.specs
            or item.nodeid in self.plan_errors
            or (item.nodeid in self.skipped)
        )

    def report_item(self, item: pytest.Item) -> None:
        """Wait for the config's final record (printing progress meanwhile) and report it."""
        if item.nodeid in self.plan_errors:
            reports = synthesized(item, "error", self.plan_errors[item.nodeid], 0.0)
        elif item.nodeid in self.skipped:
            spec, reason = self.skipped[item.nodeid]
            reports = skipped_reports(item, reason)
            if self._results is not None:
                self._results.append(skipped_record(spec))
        else:
            delivery = self._wait(item.nodeid)
            reports = item_reports(item, delivery)
            self.durations[item.nodeid] = delivery.record.duration_s
        hook = item.ihook
        hook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        for report in reports:
            hook.pytest_runtest_logreport(report=report)
        hook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)

    def _wake(self) -> None:
        with self._arrived:
            self._arrived.notify_all()

    def _wait(self, nodeid: str) -> Delivery:
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
                    return self._stranded(self.specs[nodeid], scheduler.error)
                if not arrived and reporter is not None:
                    flights = scheduler.in_flight()
                    reporter.write_line(self.stats.progress_line(flights, stalled_s=interval))
            return self._final.pop(nodeid)

    def _stranded(self, spec: ConfigSpec, error: str | None) -> Delivery:
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
                self._results.append(never.record)
            except OSError as exc:
                note = f"its record could not be written to {self._results.path} either: {exc}"
        with self.stats.lock:
            self.stats.done += 1
            self.stats.not_run.append(spec.nodeid)
        return replace(never, final=True, note=note)

    def record_plain(self, report: pytest.TestReport) -> None:
        """Durations and results records for unmarked tests (they run in the parent)."""
        self._plain.setdefault(report.nodeid, []).append(report)
        if report.when != "teardown":
            return
        reports = self._plain.pop(report.nodeid)
        self.durations[report.nodeid] = sum(r.duration for r in reports)
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
        if self._scheduler is not None and self.launcher is not None:
            lines.append(self.launcher.describe())
        if self._results is not None:
            lines.append(f"results: {self._results.path}")
        return lines

    def finish(self) -> None:
        if self._scheduler is not None:
            with self.stats.lock:
                closing = self.stats.done >= self.stats.total  # not cut short
            self._scheduler.stop(grace_s=_CLOSING_GRACE_S if closing else 0.0)
        if self.launcher is not None:
            self.launcher.close()
        if self._results is not None:
            self._results.close()
        self._save_durations()
        if self._run_dir is not None and not self.settings.keep_worlds:
            shutil.rmtree(self._run_dir, ignore_errors=True)

    # -- durations -----------------------------------------------------------------------------
    def _load_durations(self) -> dict[str, float]:
        """The durations every shard of the run balances by: the file or URL given, else this
        runner's own cache (which other runners do not share). A URL that gives nothing is a
        warning, not an error: the shard runs, balanced by the cache, and the plan hash it
        uploads lets the report flag the run if its shards disagree."""
        source = self.settings.durations
        if source is not None and source.is_url:
            try:
                durations = durations_fetch.fetch(source.location)
            except durations_fetch.DurationsUnavailable as exc:
                print(
                    f"cpci: warning: --cpci-durations: {exc}; balancing shards by pytest's cache "
                    "instead (other shards of this run may plan differently)",
                    file=sys.stderr,
                    flush=True,
                )
            else:
                self.durations_from = source.location
                return durations
        elif source is not None:
            try:
                durations = sharding.load(source.path)
            except ValueError as exc:
                raise pytest.UsageError(f"--cpci-durations: {exc}") from None
            self.durations_from = source.location
            return durations
        cache = getattr(self.config, "cache", None)
        return dict(cache.get(_DURATIONS_CACHE_KEY, {})) if cache is not None else {}

    def _record_shard_plan(self, nodeids: list[str]) -> None:
        """Hash this shard's plan inputs and write them beside the results file."""
        shard = self.settings.shard or (0, 1)
        self.shard_plan = sharding.shard_plan(nodeids, self.durations, shard, self.durations_from)
        if self.settings.results is not None:
            path = Path(plan_path(str(self.settings.results)))
            sharding.write_plan(path, self.shard_plan)

    def _save_durations(self) -> None:
        if self.settings.plan_only:
            return
        source = self.settings.durations
        if source is not None and not source.is_url and sharding.recorded_here(source.path):
            sharding.save(source.path, self.durations)
            return
        cache = getattr(self.config, "cache", None)
        if cache is not None:
            cache.set(_DURATIONS_CACHE_KEY, self.durations)


def _plan_text(plan: ShardPlan) -> str:
    return (
        f"shard plan {plan.plan_hash[:12]}: {plan.configs} node id(s) shared out over "
        f"{plan.shard_total} shard(s), durations from {plan.durations_from}"
    )


def _visible_gpus(backend: str) -> int:
    """GPUs worlds can be spread over; a cheap driver check keeps torch out of CPU-only parents."""
    if backend == "gloo" or not Path("/proc/driver/nvidia").exists():
        return 0
    import torch

    return int(torch.cuda.device_count())
