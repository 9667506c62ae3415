"""The pages' plots, drawn from their read models (so a plot never shows what the JSON hides)."""

from __future__ import annotations

import functools
import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup

from cpci.schema import FAILING_OUTCOMES
from cpci.server.ui.svg import Cell, Point, Tick, outcome_strip, scatter_plot
from cpci.server.views.read_models import ConfigOverview, ConfigPoint, Dashboard, RunRow

KIND = {"pass": "ok", "fail": "fail", "mixed": "mixed", "skip": "skip"}


def _kind(outcome: str) -> str:
    if outcome in FAILING_OUTCOMES:
        return "fail"
    return "skip" if outcome == "skipped" else "ok"


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
    ticks = _commit_ticks([r.run.commit for r in rows], [about(r) for r in rows])
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


@dataclass(frozen=True)
class _Commit:
    """One commit's results of a config, in the order the config met its commits."""

    commit: str
    points: list[ConfigPoint]


def _by_commit(points: Sequence[ConfigPoint]) -> list[_Commit]:
    """The points grouped by commit, oldest first (a commit's place is its first result, as in
    the timeline)."""
    groups: dict[str, list[ConfigPoint]] = {}
    for p in points:
        groups.setdefault(p.commit, []).append(p)
    return [_Commit(commit, group) for commit, group in groups.items()]


def _commit_ticks(commits: Sequence[str], titles: Sequence[str]) -> list[Tick]:
    """Short shas at their commits' positions, every k-th when more than fit, always the newest."""
    every = max(1, math.ceil(len(commits) / MAX_COMMIT_TICKS))
    return [
        Tick(float(i), commit[:7], title)
        for i, (commit, title) in enumerate(zip(commits, titles, strict=True))
        if (len(commits) - 1 - i) % every == 0
    ]


def per_commit_plot(
    overview: ConfigOverview,
    *,
    name: str,
    unit: str,
    value: Callable[[ConfigPoint], float | None],
    plot_id: str,
) -> Markup:
    """One mark per commit at the median of the config's values there, a bar across their range
    (reruns, repeated runs, other runners), commits oldest left; each mark links to the newest
    run at its commit and says what the values were, when and where."""
    commits = [
        c for c in _by_commit(overview.points) if any(value(p) is not None for p in c.points)
    ]
    points, titles = [], []
    for i, c in enumerate(commits):
        having = [p for p in c.points if value(p) is not None]
        values = sorted(v for p in having if (v := value(p)) is not None)
        last = having[-1]
        outcomes = Counter(p.outcome for p in having)
        when = f"{last.when:%Y-%m-%d %H:%M} UTC"
        title = f"{c.commit[:10]}, run {last.ci_run_id}, {when}"
        spread = f", {values[0]:.3g} to {values[-1]:.3g}{unit}" if len(values) > 1 else ""
        points.append(
            Point(
                x=float(i),
                y=statistics.median(values),
                label=f"{title}: median {statistics.median(values):.3g}{unit} of "
                f"{len(values)} result(s){spread}; "
                + ", ".join(f"{n} {o}" for o, n in sorted(outcomes.items()))
                + (f"; on {last.runner}" if last.runner else ""),
                kind=_commit_kind(outcomes),
                href=last.page_url,
                low=values[0],
                high=values[-1],
            )
        )
        titles.append(title)
    failing = sum(p.kind == "fail" for p in points)
    return scatter_plot(
        title=f"{name} per commit",
        description=f"The median {name} of each of {len(points)} commits, with the range of "
        f"its results; {failing} commits had failing results, drawn in red.",
        x_label="commit (oldest → newest): median, and the range of its results",
        y_label=f"{name}{f' ({unit.strip()})' if unit else ''}",
        points=points,
        plot_id=plot_id,
        x_ticks=_commit_ticks([c.commit for c in commits], titles),
    )


def _commit_kind(outcomes: Counter[str]) -> str:
    """A commit's mark: red when any result there failed, grey when all skipped."""
    kinds = {_kind(o) for o in outcomes}
    if "fail" in kinds:
        return "fail"
    return "skip" if kinds == {"skip"} else "ok"


def _metric(name: str, point: ConfigPoint) -> float | None:
    return point.metrics.get(name)


def duration_plot(overview: ConfigOverview) -> Markup:
    return per_commit_plot(
        overview, name="duration", unit=" s", value=lambda p: p.duration_s, plot_id="durations"
    )


def metric_plots(overview: ConfigOverview) -> list[Markup]:
    """One plot per numeric metric the config reported (e.g. max abs error vs reference)."""
    names = sorted({name for p in overview.points for name in p.metrics})
    return [
        per_commit_plot(
            overview,
            name=name,
            unit="",
            value=functools.partial(_metric, name),
            plot_id=f"metric-{n}",
        )
        for n, name in enumerate(names)
    ]
