"""The pages' plots, drawn from their read models (so a plot never shows what the JSON hides)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

from markupsafe import Markup

from cpci.schema import FAILING_OUTCOMES
from cpci.server.ui.svg import Cell, Point, outcome_strip, scatter_plot
from cpci.server.views.read_models import ConfigOverview, Dashboard

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


def pass_rate_trend(dashboard: Dashboard) -> Markup:
    """Pass rate per run, oldest left; each point links to its run."""
    rows = [r for r in reversed(dashboard.runs) if r.pass_rate is not None]
    points = [
        Point(
            x=float(i),
            y=(r.pass_rate or 0.0) * 100,
            label=f"run {r.run.ci_run_id} @ {r.run.commit[:10]}: {(r.pass_rate or 0):.1%} "
            f"passed, {r.failing} failing",
            kind="ok" if not r.failing else "fail",
            href=r.page_url,
        )
        for i, r in enumerate(rows)
    ]
    return scatter_plot(
        title=f"Pass rate, last {len(rows)} runs of {dashboard.branch or 'any branch'}",
        description="Pass rate (passes over passes and failures) of each run, oldest left. "
        f"{sum(1 for r in rows if r.failing)} of {len(rows)} runs had failing configs.",
        x_label="run (oldest → newest)",
        y_label="pass rate",
        points=points,
        x_format=lambda x: f"{x:.0f}",
        y_format=_percent,
        y_range=(0.0, 100.0),
        plot_id="pass-rate",
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
        x_label="shard start (UTC)",
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
        points = [
            Point(
                x=p.when.timestamp(),
                y=p.metrics[name],
                label=f"{name} = {p.metrics[name]:.3g}, run {p.ci_run_id} @ {p.commit[:10]}",
                kind=_kind(p.outcome),
                href=p.page_url,
            )
            for p in overview.points
            if name in p.metrics
        ]
        plots.append(
            scatter_plot(
                title=f"{name} over time",
                description=f"{len(points)} values of the metric {name}.",
                x_label="shard start (UTC)",
                y_label=name,
                points=points,
                x_format=_date_format([p.x for p in points]),
                plot_id=f"metric-{n}",
            )
        )
    return plots
