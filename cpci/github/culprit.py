"""The bisection's next step: run one config at the middle of its culprit range.

The service names the range a config broke in on a trusted branch (`cpci.schema.CulpritRange`,
`GET .../culprit`); `next_bisection_run` dispatches the reusable workflow's culprit job for the
range's midpoint (actions/create-workflow-dispatch). That run uploads the config's result at
the midpoint, which narrows the range, and ends by calling this again, until one suspect is
left. Reads the range as the service sends it: nothing of the service is imported.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpci.github.client import GitHubClient
from cpci.schema.culprit import CulpritRange

#: The reusable workflow's input names for the culprit job.
CONFIG_INPUT, COMMIT_INPUT = "culprit-config", "culprit-commit"


@dataclass(frozen=True)
class BisectionStep:
    """What this step did: `dispatched` the run of `commit`, or stopped, saying why."""

    dispatched: bool
    commit: str | None
    message: str


def next_bisection_run(
    found: CulpritRange, github: GitHubClient, *, workflow: str, ref: str
) -> BisectionStep:
    """Dispatch `workflow` on `ref` to run `found.config` at the range's midpoint, or say why
    there is nothing to run (the culprit found, or no break named)."""
    if found.culprit is not None:
        return BisectionStep(False, found.culprit, f"{found.config}: broken by {found.culprit}")
    mid = found.midpoint()
    if mid is None:
        return BisectionStep(
            False, None, f"{found.config}: nothing to bisect ({found.status}): {found.reason}"
        )
    github.dispatch_workflow(
        found.repository,
        workflow,
        ref=ref,
        inputs={CONFIG_INPUT: found.config, COMMIT_INPUT: mid},
    )
    return BisectionStep(
        True,
        mid,
        f"{found.config}: {len(found.suspects)} suspects between {found.last_good} and "
        f"{found.first_bad}; running it at {mid}",
    )
