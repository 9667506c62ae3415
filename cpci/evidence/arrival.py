"""New configs tried before they land (Datadog's early flake detection): who gets extra runs.

A config with no history on the base branch (absent from the evidence summary), or whose test
file the pull request changed, has never shown how often it fails; a flaky one would land and
then fail other people's PRs. The runner runs such a config `k` more times, each alone in a fresh
world (`--cpci-new-config-runs K`), its records marked `arrival: true`; the service calls a
config whose arrival runs hold a failure and a pass FLAKY ON ARRIVAL, which gates the merge.
"""

from __future__ import annotations

from cpci.schema import ConfigEvidence


def arrival_runs(evidence: ConfigEvidence | None, file_changed: bool, k: int) -> int:
    """The extra runs this config gets before it lands: `k` for a config new to the base branch
    (`evidence` None or without trials) or whose test file the PR changed, else 0."""
    if k < 0:
        raise ValueError(f"--cpci-new-config-runs must be >= 0, got {k}")
    new = evidence is None or not evidence.record.trials
    return k if new or file_changed else 0
