"""The runner's option vocabularies: what each setting may say, named once, below every side.

The settings table (`cpci.runner.settings`) validates a value against these, and the side that
acts on it reads the same type: the launcher (`LauncherName`), the harness classes' planning
(`TestcasesSetting`), the durations that balance shards and the evidence reruns are decided by
(each a `ServiceSource`: a file or the service's URL), the world's backend (`BackendSetting`).
How failures are rerun (`--cpci-reruns-policy`) is the evidence rule's own vocabulary,
`cpci.evidence.RerunMode`. Nothing here imports a side of the runner but the wire's `Backend`, so
the settings, the parent, the ranks and the launchers import it without sitting above one another.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from cpci.runner.wire.protocol import Backend

#: What `--cpci-launcher` takes.
LauncherName = Literal["fork", "torchrun"]
LAUNCHER_NAMES: tuple[LauncherName, ...] = get_args(LauncherName)

#: What `--cpci-testcases` takes: `off` leaves harness classes to their own spawn.
TestcasesSetting = Literal["off", "shared"]
TESTCASES_SETTINGS: tuple[TestcasesSetting, ...] = get_args(TestcasesSetting)

#: What `--cpci-backend` takes: a backend, or `auto` (nccl where CUDA is present, else gloo).
BackendSetting = Literal["auto", Backend]
BACKEND_SETTINGS: tuple[BackendSetting, ...] = get_args(BackendSetting)


@dataclass(frozen=True)
class ServiceSource:
    """What `--cpci-durations` and `--cpci-evidence` name: a file holding the service's answer,
    or the URL of the service's endpoint (fetched once, in the parent)."""

    location: str

    @property
    def is_url(self) -> bool:
        return self.location.startswith(("http://", "https://"))

    @property
    def path(self) -> Path:
        """The file (only for a source that is not a URL)."""
        assert not self.is_url, "a URL has no path"
        return Path(self.location)

    def __str__(self) -> str:
        return self.location


#: What `--cpci-durations` names.
DurationsSource = ServiceSource


def parse_durations_source(text: str) -> ServiceSource:
    """`--cpci-durations`'s value: an http(s) URL or a file path; ValueError when empty."""
    return _parse_source(text, "durations")


def parse_evidence_source(text: str) -> ServiceSource:
    """`--cpci-evidence`'s value: an http(s) URL or a file path; ValueError when empty."""
    return _parse_source(text, "evidence")


def _parse_source(text: str, endpoint: str) -> ServiceSource:
    value = text.strip()
    if not value:
        raise ValueError(f"must be a file path or an http(s):// URL of the {endpoint} endpoint")
    if "://" in value and not value.startswith(("http://", "https://")):
        raise ValueError("must be a file path or an http:// or https:// URL")
    return ServiceSource(value)
