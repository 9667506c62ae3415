"""The runner's settings: one table of options, one resolver, one validated object.

Each setting may come from the command line, an environment variable or an ini key; the
precedence is CLI > env > ini > default (a test's own marker beats all of them where the marker
has the setting, e.g. `timeout`). A bad value is a usage error that names where it came from.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from cpci.evidence import RERUN_MODES, RerunMode
from cpci.runner.options import (
    BACKEND_SETTINGS,
    LAUNCHER_NAMES,
    TESTCASES_SETTINGS,
    BackendSetting,
    DurationsSource,
    LauncherName,
    ServiceSource,
    TestcasesSetting,
    parse_durations_source,
    parse_evidence_source,
)
from cpci.shard_spec import parse_shard

#: Environment only (a post-mortem aid, not a run setting): any non-empty value keeps each
#: world's directory (plan, journals, rank logs, stacks) under the system temp dir.
KEEP_WORLDS_ENV = "CPCI_KEEP_WORLDS"

_Choice = TypeVar("_Choice", bound=str)


def _int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"must be an integer >= {minimum}") from None
        if value < minimum:
            raise ValueError(f"must be >= {minimum}")
        return value

    return parse


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError("must be a number of seconds > 0") from None
    if not value > 0:
        raise ValueError("must be > 0")
    return value


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError("must be a fraction > 0 and <= 1 (0.25: a quarter)") from None
    if not 0 < value <= 1:
        raise ValueError("must be > 0 and <= 1")
    return value


def _one_of(choices: tuple[_Choice, ...]) -> Callable[[str], _Choice]:
    def parse(text: str) -> _Choice:
        for choice in choices:
            if text == choice:
                return choice
        raise ValueError(f"must be one of {', '.join(choices)}")

    return parse


@dataclass(frozen=True)
class Option:
    """One setting and every place it can be given; `field` is its `RunnerSettings` attribute
    (pytest's own name for the flag's value, `config.getoption("cpci_batch_size")`, is the
    flag's)."""

    field: str
    flag: str
    help: str
    parse: Callable[[str], Any]
    default: str | None
    env: str | None = None
    ini: str | None = None
    metavar: str = "N"

    def help_text(self) -> str:
        sources = [self.flag]
        if self.env:
            sources.append(f"env {self.env}")
        if self.ini:
            sources.append(f"ini {self.ini}")
        default = f"; default {self.default}" if self.default is not None else ""
        return f"{self.help} (precedence: {' > '.join(sources)}{default})"

    @property
    def dest(self) -> str:
        """Where pytest keeps the flag's value: `--cpci-batch-size` -> `cpci_batch_size`."""
        return self.flag.removeprefix("--").replace("-", "_")


OPTIONS: tuple[Option, ...] = (
    Option(
        "world_cap",
        "--cpci-batch-size",
        "the most configs one world runs before a fresh world takes the rest of its queue "
        "(default: no cap); 1 gives a fresh world per config, for bisecting and full isolation",
        _int_at_least(1),
        None,
        env="CP_TEST_BATCH_SIZE",
        ini="cpci_batch_size",
    ),
    Option(
        "timeout",
        "--cpci-timeout",
        "seconds one config may run before its world is dumped and killed; "
        "@pytest.mark.cpci(timeout=...) wins",
        _positive_float,
        "300",
        env="CPCI_TIMEOUT",
        ini="cpci_timeout",
        metavar="SECONDS",
    ),
    Option(
        "workers",
        "--cpci-workers",
        "worlds run at once, each taking the next config of its group's queue as it frees up "
        "(on disjoint GPUs, or bounded by CPU cores)",
        _int_at_least(1),
        "1",
        env="CPCI_WORKERS",
        ini="cpci_workers",
    ),
    Option(
        "backend",
        "--cpci-backend",
        "process-group backend: auto picks nccl where CUDA is present, else gloo",
        _one_of(BACKEND_SETTINGS),
        "auto",
        env="CPCI_BACKEND",
        ini="cpci_backend",
        metavar="{auto,gloo,nccl}",
    ),
    Option(
        "results",
        "--cpci-results",
        "JSON-lines file that gets each config's cpci.result/1 record the moment it ends",
        Path,
        None,
        env="CPCI_RESULTS",
        ini="cpci_results",
        metavar="PATH",
    ),
    Option(
        "durations",
        "--cpci-durations",
        "recorded per-config durations that balance shards: a file, or the service's "
        "http(s)://.../durations URL, fetched once with CPCI_TOKEN (default: pytest's cache)",
        parse_durations_source,
        None,
        env="CPCI_DURATIONS",
        ini="cpci_durations",
        metavar="PATH|URL",
    ),
    Option(
        "shard",
        "--cpci-shard",
        "run only shard INDEX of TOTAL, balanced by recorded durations",
        parse_shard,
        None,
        env="CPCI_SHARD",
        metavar="INDEX/TOTAL",
    ),
    Option(
        "max_respawns",
        "--cpci-max-respawns",
        "fresh worlds in a row a group may start after worlds that ended without running a "
        "config (start-up failures) before it gives up; a crash or hang blamed on a config "
        "never counts",
        _int_at_least(0),
        "3",
        env="CPCI_MAX_RESPAWNS",
        ini="cpci_max_respawns",
    ),
    Option(
        "reruns",
        "--cpci-reruns",
        "the most times a config that failed, errored, crashed or timed out is rerun alone, each "
        "in a fresh world, stopping at its first pass (a pass after failures is FLAKY) or, with "
        "--cpci-reruns-policy adaptive, once its evidence decides the failure; with "
        "--cpci-isolate-failures the isolating alone run is the first rerun",
        _int_at_least(0),
        "0",
        env="CPCI_RERUNS",
        ini="cpci_reruns",
    ),
    Option(
        "reruns_policy",
        "--cpci-reruns-policy",
        "adaptive: rerun a failure only while the chance test the service judges by cannot yet "
        "call it the PR's (weighed against the config's base-branch record from --cpci-evidence; "
        "without one, or for a config with no history there, every failure is rerun to the cap, "
        "as fixed does); fixed: rerun every failure to the cap",
        _one_of(RERUN_MODES),
        "adaptive",
        env="CPCI_RERUNS_POLICY",
        ini="cpci_reruns_policy",
        metavar="{adaptive,fixed}",
    ),
    Option(
        "evidence",
        "--cpci-evidence",
        "each config's base-branch evidence, for adaptive reruns and new configs' runs: a "
        "cpci.evidence/1 file, or the service's http(s)://.../api/v1/repos/OWNER/NAME/evidence"
        "?branch=BRANCH URL, fetched once with CPCI_TOKEN and kept beside --cpci-results (a "
        "fetch that fails: fixed reruns, said in the summary)",
        parse_evidence_source,
        None,
        env="CPCI_EVIDENCE",
        ini="cpci_evidence",
        metavar="PATH|URL",
    ),
    Option(
        "new_config_runs",
        "--cpci-new-config-runs",
        "extra runs, each alone in a fresh world, of a config new to the base branch (absent from "
        "--cpci-evidence) or whose test file --cpci-changed-files names; a fail and a pass among "
        "them is FLAKY ON ARRIVAL",
        _int_at_least(0),
        "0",
        env="CPCI_NEW_CONFIG_RUNS",
        ini="cpci_new_config_runs",
    ),
    Option(
        "new_config_share",
        "--cpci-new-config-share",
        "the most of the shard's time new configs' extra runs may take, as a fraction of the time "
        "its configs' own attempts took; a run that would go past it is not started",
        _share,
        "0.25",
        env="CPCI_NEW_CONFIG_SHARE",
        ini="cpci_new_config_share",
        metavar="FRACTION",
    ),
    Option(
        "changed_files",
        "--cpci-changed-files",
        "a file listing the paths the pull request changed, one per line, relative to the "
        "rootdir: the configs of a changed test file get --cpci-new-config-runs",
        Path,
        None,
        env="CPCI_CHANGED_FILES",
        ini="cpci_changed_files",
        metavar="PATH",
    ),
    Option(
        "bisect_time",
        "--cpci-bisect-time",
        "seconds the search for an order-dependent failure's polluter may take (at most "
        "ceil(log2 n) + 2 fresh-world replays among n predecessors); past it, the smallest set "
        "of predecessors seen to make it fail is named",
        _positive_float,
        "600",
        env="CPCI_BISECT_TIME",
        ini="cpci_bisect_time",
        metavar="SECONDS",
    ),
    Option(
        "gpus",
        "--cpci-gpus",
        "GPUs this runner spreads worlds over, handed out by the names in its own "
        "CUDA_VISIBLE_DEVICES (default: torch.cuda.device_count(), none with --cpci-backend gloo); "
        "a config needing more is skipped",
        _int_at_least(0),
        None,
        env="CPCI_GPUS",
        ini="cpci_gpus",
    ),
    Option(
        "progress_interval",
        "--cpci-progress-interval",
        "seconds between progress lines while configs run",
        _positive_float,
        "10",
        env="CPCI_PROGRESS_INTERVAL",
        ini="cpci_progress_interval",
        metavar="SECONDS",
    ),
    Option(
        "testcases",
        "--cpci-testcases",
        "shared: unittest classes of torch's MultiProcessTestCase family (DTensorTestBase, "
        "distributed_test, MultiProcContinuousTest...) run their tests in cpci's worlds instead "
        "of spawning a world per test (see docs/porting.md); off: they spawn their own",
        _one_of(TESTCASES_SETTINGS),
        "off",
        env="CPCI_TESTCASES",
        ini="cpci_testcases",
        metavar="{off,shared}",
    ),
    Option(
        "launcher",
        "--cpci-launcher",
        "how a world's ranks start: fork them from one preloaded interpreter per session "
        "(torch, pytest and the test modules' imports loaded once; falls back to torchrun with a "
        "warning where forking is unsafe), or start each world with torchrun",
        _one_of(LAUNCHER_NAMES),
        "fork",
        env="CPCI_LAUNCHER",
        ini="cpci_launcher",
        metavar="{fork,torchrun}",
    ),
)


@dataclass(frozen=True)
class RunnerSettings:
    """The validated runner settings for one pytest session."""

    #: The most configs one world runs (`--cpci-batch-size`); None: no cap.
    world_cap: int | None
    timeout: float
    workers: int
    backend: BackendSetting
    results: Path | None
    durations: DurationsSource | None
    shard: tuple[int, int] | None
    max_respawns: int
    #: The most reruns of one failure (`--cpci-reruns`); `reruns_policy` says which are made.
    reruns: int
    progress_interval: float
    gpus: int | None
    isolate_failures: bool
    plan_only: bool
    keep_worlds: bool = False
    testcases: TestcasesSetting = "off"
    launcher: LauncherName = "fork"
    reruns_policy: RerunMode = "adaptive"
    evidence: ServiceSource | None = None
    new_config_runs: int = 0
    new_config_share: float = 0.25
    changed_files: Path | None = None
    bisect_time: float = 600.0
    #: Where `timeout` came from, as a config's timeout message names it (a marker's wins).
    timeout_from: str = "cpci's default"


def add_options(parser: pytest.Parser) -> None:
    """Register every option, its ini key and its help (with the precedence) with pytest."""
    group = parser.getgroup("cpci", "cpci batched distributed runner")
    for option in OPTIONS:
        group.addoption(
            option.flag,
            dest=option.dest,
            metavar=option.metavar,
            default=None,
            help=option.help_text(),
        )
        if option.ini:
            parser.addini(option.ini, help=option.help, default=None)
    group.addoption(
        "--cpci-isolate-failures",
        action="store_true",
        dest="cpci_isolate_failures",
        help="rerun each config that failed, crashed or timed out in a shared world alone, in a "
        "fresh world (at least once, whatever --cpci-reruns says); failing alone too is broken, a "
        "fail-then-pass is flaky, and a first pass alone that fails again after its "
        "predecessors is order-dependent (a failure)",
    )
    group.addoption(
        "--cpci-plan",
        action="store_true",
        dest="cpci_plan",
        help="print the groups (one queue of configs per world size and backend) and shard that "
        "would run, and run nothing",
    )


def resolve(config: pytest.Config, environ: dict[str, str] | None = None) -> RunnerSettings:
    """Build the settings from CLI, environment and ini, naming the source of a bad value."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for option in OPTIONS:
        raw, source = _lookup(config, env, option)
        sources[option.field] = source
        if raw is None:
            values[option.field] = None
            continue
        try:
            values[option.field] = option.parse(raw)
        except ValueError as exc:
            raise pytest.UsageError(f"{option.flag} {exc}, got {raw!r} (from {source})") from None
    return RunnerSettings(
        isolate_failures=bool(config.getoption("cpci_isolate_failures")),
        plan_only=bool(config.getoption("cpci_plan")),
        keep_worlds=env.get(KEEP_WORLDS_ENV, "") != "",
        timeout_from="cpci's default" if sources["timeout"] == "default" else sources["timeout"],
        **values,
    )


def _lookup(
    config: pytest.Config, env: os._Environ[str] | dict[str, str], option: Option
) -> tuple[str | None, str]:
    cli = config.getoption(option.dest)
    if cli is not None:
        return str(cli), option.flag
    if option.env and env.get(option.env, "") != "":
        return env[option.env], f"environment variable {option.env}"
    if option.ini:
        ini = config.getini(option.ini)
        if ini not in (None, "", []):
            return str(ini), f"ini key {option.ini} in {config.inipath}"
    return option.default, "default"
