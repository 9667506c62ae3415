"""cpci beside pytest-xdist: plain tests may spread over xdist's workers, cpci's configs may not.

cpci already runs its configs in parallel, in shared worlds it schedules itself. Every xdist
worker collects the whole suite, so each would start worlds for every config, run them all and
report its own share: the work done once per worker, and the ranks of several worlds fighting
over the same GPUs. In an xdist worker each config is therefore an error that says what to do
instead, while the plain tests run as usual (their records land in one results file: each
worker appends whole lines to it). xdist's controller, which collects nothing, starts no fork
server, and keeps the durations every worker hands it, in one write at its end.
"""

from __future__ import annotations

import pytest

REFUSAL = (
    "cpci configs do not run under pytest-xdist: cpci runs them in shared worlds of its own, "
    "which every xdist worker would start again. Run them without -n (`pytest -p no:xdist "
    "<their files>`) and the plain tests with -n apart; --cpci-shard splits configs over machines"
)


def is_xdist_controller(config: pytest.Config) -> bool:
    """The process that hands tests to xdist's workers and runs none itself (`-n N`, N > 0)."""
    return getattr(config.option, "dist", "no") != "no" and not is_xdist_worker(config)


def is_xdist_worker(config: pytest.Config) -> bool:
    """A process xdist started to run the tests it is sent (xdist sets `workerinput` on it)."""
    return hasattr(config, "workerinput")


def refusal(config: pytest.Config) -> str | None:
    """Why this process runs no config (`plan_session`'s `cannot_run`), or None where it may."""
    return REFUSAL if is_xdist_worker(config) else None


#: The key of a worker's durations in what it hands xdist's controller (`workeroutput`).
DURATIONS_KEY = "cpci_durations"


def hand_over_durations(config: pytest.Config, recorded: dict[str, float]) -> None:
    """A worker's times, for the controller to keep with the others' (`handed_over_durations`):
    each worker saving its own would leave the cache with the last one's tests only."""
    config.workeroutput[DURATIONS_KEY] = recorded  # type: ignore[attr-defined]


def handed_over_durations(node: object) -> dict[str, float]:
    """The times a finished worker (xdist's `WorkerController`) handed over; {} if none."""
    output = getattr(node, "workeroutput", None) or {}
    return dict(output.get(DURATIONS_KEY, {}))
