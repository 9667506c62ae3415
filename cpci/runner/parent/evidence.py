"""What the base branch says of each config, read once before the run: reruns and new configs.

`--cpci-evidence` names the service's evidence summary (`GET .../evidence?branch=B`, a
`cpci.schema.EvidenceSummary`) or a file holding one. It is read once, in the parent, with the
durations (by `cpci.runner.parent.durations_fetch`), and a fetched summary is kept in the run's
artifacts (`RESULTS.evidence.json` beside `--cpci-results`, else in pytest's cache dir), so what
each rerun was decided by stays with the results. The run then decides every rerun with
`cpci.evidence.decide_rerun`, the rule the service judges by, weighed with the summary's own
threshold and level (`rule`), and gives the configs the summary lacks (new to the base branch)
or whose test file the PR changed their arrival runs (`arrival_runs`).

A fetch that fails is never fatal: the run falls back to fixed reruns (every failure rerun to
the cap, as before adaptive reruns) and no arrival runs for want of history, and the terminal
summary says so (`warning`). A file that is not a summary is a usage error, as a bad durations
file is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pydantic import ValidationError

from cpci.evidence import DEFAULT_CAPS, EvidencePolicy, RerunMode, RerunRule, arrival_runs
from cpci.runner.options import ServiceSource
from cpci.runner.parent import durations_fetch
from cpci.schema import ConfigEvidence, EvidenceSummary

#: The fetched summary's name beside the results file.
SUFFIX = ".evidence.json"


@dataclass(frozen=True)
class RunEvidence:
    """The summary this run decides by (None: none given, or the fetch failed: `warning` says
    why), where it came from, and the test files the PR changed."""

    summary: EvidenceSummary | None
    came_from: str
    warning: str = ""
    kept_at: Path | None = None
    changed: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def load(
        cls,
        source: ServiceSource | None,
        keep_in: Path | None,
        changed_files: Path | None = None,
        *,
        fetch: Callable[[str], str] = durations_fetch.fetch_text,
    ) -> RunEvidence:
        """Read the summary `source` names: a URL is fetched (`fetch`) and kept at `keep_in`,
        a file is read; a fetch that fails gives no summary and a warning."""
        changed = _changed(changed_files)
        if source is None:
            return cls(None, "none (--cpci-evidence not given)", changed=changed)
        if not source.is_url:
            try:
                text = source.path.read_text(encoding="utf-8")
                summary = EvidenceSummary.model_validate_json(text)
            except (OSError, ValueError) as exc:
                raise pytest.UsageError(
                    f"--cpci-evidence {source.path}: not a cpci.evidence/1 file ({_first(exc)}); "
                    "save the service's .../evidence answer, or give its URL"
                ) from None
            return cls(summary, str(source.path), changed=changed)
        try:
            summary = EvidenceSummary.model_validate_json(fetch(source.location))
        except durations_fetch.ServiceUnavailable as exc:
            return cls(None, source.location, _fallback(str(exc)), changed=changed)
        except ValidationError as exc:
            why = f"{source.location} did not answer a cpci.evidence/1 document ({_first(exc)})"
            return cls(None, source.location, _fallback(why), changed=changed)
        if keep_in is not None:
            keep_in.parent.mkdir(parents=True, exist_ok=True)
            keep_in.write_text(summary.model_dump_json(by_alias=True), encoding="utf-8")
        return cls(summary, source.location, kept_at=keep_in, changed=changed)

    def rule(self, mode: RerunMode, cap: int) -> RerunRule:
        """The rerun rule of this run: `mode` with the summary's threshold and level; adaptive
        whose summary was asked for and could not be had is fixed, with fixed's cap (at most
        `DEFAULT_CAPS["fixed"]` reruns: every failure pays them)."""
        if self.summary is None and self.warning and mode == "adaptive":
            # Asked for and not had: the fixed rule, at its own cap (every failure pays it).
            return RerunRule("fixed", min(cap, DEFAULT_CAPS["fixed"]))
        if self.summary is None:
            return RerunRule(mode, cap)
        policy = EvidencePolicy(self.summary.threshold, self.summary.level)
        return RerunRule(mode, cap, policy)

    def entry(self, key: str) -> ConfigEvidence | None:
        """The config's base-branch evidence (None: no history there, or no summary)."""
        return self.summary.entry(key) if self.summary is not None else None

    def arrival_runs(self, key: str, test_file: str, k: int) -> int:
        """The extra runs of this config (`--cpci-new-config-runs K`): a config the summary
        lacks is new, one whose test file the PR changed is too; without a summary only the
        changed files' configs are known to be new."""
        changed = test_file in self.changed
        if self.summary is None:
            return k if changed else 0
        return arrival_runs(self.summary.entry(key), changed, k)

    def describe(self) -> str:
        """The terminal summary's line: what the reruns were decided by."""
        if self.warning:
            return self.warning
        if self.summary is None:
            return ""
        s = self.summary
        return (
            f"evidence: {len(s.configs)} config(s) from {s.runs} run(s) of {s.branch} "
            f"({self.came_from})"
        )


def _fallback(why: str) -> str:
    return (
        f"cpci: warning: --cpci-evidence: {why}; every failure is rerun (fixed reruns, at most "
        f"{DEFAULT_CAPS['fixed']}) and no config gets new-config runs for want of its history"
    )


def _changed(path: Path | None) -> frozenset[str]:
    if path is None:
        return frozenset()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise pytest.UsageError(
            f"--cpci-changed-files {path}: cannot read it ({exc.strerror}); give a file of the "
            "paths the pull request changed, one per line"
        ) from None
    return frozenset(line.strip().removeprefix("./") for line in text.splitlines() if line.strip())


def _first(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
