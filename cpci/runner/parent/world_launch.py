"""What every world of a session starts with that is not its configs: the `WorldLaunch`.

Built once, when the session starts its worlds, from the parent's pytest configuration: the
options that shape collection go to the ranks' own pytest (less output and caching), and what
the ranks collect is the configs' files, unless their node ids need the parent's own arguments
to come out the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cpci.runner.launch.launcher import Launcher


@dataclass(frozen=True)
class WorldLaunch:
    """Everything needed to start a world that is not the configs themselves."""

    run_dir: Path
    pytest_args: list[str]
    invocation_dir: str
    start_timeout_s: float
    #: The session's launcher, shared by its worlds (a fallback to torchrun holds for all).
    launcher: Launcher
    collect_args: list[str] | None = None
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_session(
        cls,
        config: pytest.Config,
        *,
        config_files: Iterable[str],
        run_dir: Path,
        launcher: Launcher,
        start_timeout_s: float,
    ) -> WorldLaunch:
        """The launch of a session whose configs live in `config_files`."""
        return cls(
            run_dir=run_dir,
            pytest_args=rank_pytest_args(config),
            invocation_dir=str(config.invocation_params.dir),
            collect_args=collect_args(config, config_files),
            start_timeout_s=start_timeout_s,
            launcher=launcher,
        )


def collect_args(config: pytest.Config, config_files: Iterable[str]) -> list[str] | None:
    """None when the ranks may collect just the configs' files (their node ids are paths under
    the rootdir); else the parent's own arguments, e.g. `--pyargs pkg` run from outside the
    rootdir, where pytest names files relative to the argument instead."""
    root = config.rootpath
    if all(Path(path).is_relative_to(root) for path in config_files):
        return None
    return [*(["--pyargs"] if config.option.pyargs else []), *config.args]


def rank_pytest_args(config: pytest.Config) -> list[str]:
    """The parent's pytest options that shape collection, minus output and caching."""
    option = config.option
    args = [
        f"--rootdir={config.rootpath}",
        "-p",
        "no:cacheprovider",
        # The rank imported cpci before pytest started; its own modules need no rewriting.
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
    ]
    if config.inipath:
        args.append(f"--config-file={config.inipath}")
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
