"""The pages' plots, drawn from their read models (so a plot never shows what the JSON hides)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime, timezone

from markupsafe import Markup

from cpci.schema import FAILING_OUTCOMES
from cpci.server.ui.svg import Cell, Point, Tick, outcome_strip, scatter_plot
from cpci.server.views.read_models import ConfigOverview, ConfigPoint, Dashboard, RunRow

KIND = {"pass": "ok", "fail": "fail", "mixed": "mixed", "skip": "skip"}


def _kind(outcome: str) -> str:
    if outcome in FAILING_OUTCOMES:
        return "fail"
    return "skip" if outcome == "skipped" else "ok"


def _date_format(epochs: list[float]) -> Callable[[float], str]:
    """Tick labels as precise as the span needs: dates for weeks, times for hours."""
    span = max(epochs) - min(epochs) if epochs else 0.0
    pattern = "%Y-%m-%d" if span > 7 * 86400 else "%m-%d %H:%M" if span > 3600 else "%H:%M:%S"

    def label(epoch: float) -> str:
        return datetime.fromtimestamp(epoch, timezone.utc).strftime(pattern)

    return label


def _percent(value: float) -> str:
    return f"{value:.0f}%"


#: The most commits the trend's x axis names (a short sha is ~50 px of its 656).
MAX_COMMIT_TICKS = 12


def pass_rate_trend(dashboard: Dashboard) -> Markup:
    """Pass rate per run, oldest left, at its commit; each point links to its run. The x axis
    names the runs' commits (short shas; the run and its date in each tick's tooltip), every
    k-th when there are more than fit, always the newest."""
    rows = [r for r in reversed(dashboard.runs) if r.pass_rate is not None]

    def about(r: RunRow) -> str:
        when = f"{r.created_at:%Y-%m-%d %H:%M} UTC"
        return f"run {r.run.ci_run_id} @ {r.run.commit[:10]}, uploaded {when}"

    points = [
        Point(
            x=float(i),
            y=(r.pass_rate or 0.0) * 100,
            label=f"{about(r)}: {(r.pass_rate or 0):.1%} passed, {r.failing} failing",
            kind="ok" if not r.failing else "fail",
            href=r.page_url,
        )
        for i, r in enumerate(rows)
    ]
    every = max(1, math.ceil(len(rows) / MAX_COMMIT_TICKS))
    ticks = [
        Tick(float(i), r.run.commit[:7], about(r))
        for i, r in enumerate(rows)
        if (len(rows) - 1 - i) % every == 0
    ]
    return scatter_plot(
        title=f"Pass rate, last {len(rows)} runs of {dashboard.branch or 'any branch'}",
        description="Pass rate (passes over passes and failures) of each run, oldest left. "
        f"{sum(1 for r in rows if r.failing)} of {len(rows)} runs had failing configs.",
        x_label="commit (oldest → newest)",
        y_label="pass rate",
        points=points,
        y_format=_percent,
        y_range=(0.0, 100.0),
        plot_id="pass-rate",
        x_ticks=ticks,
    )


def timeline(overview: ConfigOverview) -> Markup:
    """One cell per commit, newest right, coloured by what the config did there."""
    cells = [
        Cell(
            state=c.state,
            label=f"{c.commit[:12]} ({c.branch or f'PR #{c.pull_request}'}): "
            + ", ".join(f"{n} {o}" for o, n in c.outcomes.items()),
            href=c.page_url,
        )
        for c in overview.timeline
    ]
    failed = sum(1 for c in overview.timeline if c.state == "fail")
    return outcome_strip(
        title=f"Outcome per commit, {len(cells)} commits (newest right)",
        description=f"{failed} commits failed, "
        f"{sum(1 for c in overview.timeline if c.state == 'mixed')} both passed and failed.",
        cells=cells,
    )


def time_label(points: Sequence[ConfigPoint]) -> str:
    """What a time axis's times are: when the shards ran, and where results came without their
    shard's times (an older uploader), when they were uploaded instead."""
    uploaded = sum(p.timed_by == "upload" for p in points)
    if uploaded == 0:
        return "when the shard ran (UTC)"
    if uploaded == len(points):
        return "upload time (UTC): the uploads said nothing of when their shards ran"
    return f"when the shard ran (UTC); upload time for {uploaded} result(s) sent without it"


def duration_plot(overview: ConfigOverview) -> Markup:
    points = [
        Point(
            x=p.when.timestamp(),
            y=p.duration_s,
            label=f"{p.outcome} in {p.duration_s:.3g} s, run {p.ci_run_id} @ {p.commit[:10]}"
            + (f" on {p.runner}" if p.runner else ""),
            kind=_kind(p.outcome),
            href=p.page_url,
        )
        for p in overview.points
    ]
    return scatter_plot(
        title="Duration over time",
        description=f"{len(points)} results; failing ones drawn in red.",
        x_label=time_label(overview.points),
        y_label="duration (s)",
        points=points,
        x_format=_date_format([p.x for p in points]),
        plot_id="durations",
    )


def metric_plots(overview: ConfigOverview) -> list[Markup]:
    """One plot per numeric metric the config reported (e.g. max abs error vs reference)."""
    names = sorted({name for p in overview.points for name in p.metrics})
    plots = []
    for n, name in enumerate(names):
        having = [p for p in overview.points if name in p.metrics]
        points = [
            Point(
                x=p.when.timestamp(),
                y=p.metrics[name],
                label=f"{name} = {p.metrics[name]:.3g}, run {p.ci_run_id} @ {p.commit[:10]}",
                kind=_kind(p.outcome),
                href=p.page_url,
            )
            for p in having
        ]
        plots.append(
            scatter_plot(
                title=f"{name} over time",
                description=f"{len(points)} values of the metric {name}.",
                x_label=time_label(having),
                y_label=name,
                points=points,
                x_format=_date_format([p.x for p in points]),
                plot_id=f"metric-{n}",
            )
        )
    return plots
