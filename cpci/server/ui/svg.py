"""Plots as inline SVG, rendered on the server: readable with JavaScript off, no CDN, no library.

Two shapes cover the pages: a scatter/line plot over a numeric x axis (pass rate per run,
duration and max abs error per commit, with a bar across each commit's range) and a strip of
coloured cells (one config's outcome per commit). Every text and attribute goes through
`escape`, since config names and messages come from uploads. Each plot carries `<title>` and
`<desc>` and `role="img"` for screen readers, and each mark a `data-*` attribute so tests can
count them against the data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

WIDTH, HEIGHT = 720, 240
#: The right margin holds half the last x tick's label (a short sha, a date and time).
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 64, 36, 28, 44
CELL, CELL_GAP = 14, 2


@dataclass(frozen=True)
class Point:
    """A mark at (x, y); with `low` and `high`, a vertical bar across that range at x too (the
    spread of several results whose median is y)."""

    x: float
    y: float
    label: str  # the tooltip
    kind: str = "ok"  # a CSS class: ok, fail, mixed, skip
    href: str | None = None
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Tick:
    """An x-axis tick at `value` reading `text`, with `title` as its tooltip (e.g. a commit's
    short sha, and its run and date)."""

    value: float
    text: str
    title: str = ""


@dataclass(frozen=True)
class Cell:
    state: str  # pass, fail, mixed, skip
    label: str
    href: str | None = None


def _fmt(value: float) -> str:
    """Coordinates with one decimal: enough for a screen, short enough for big plots."""
    return f"{value:.1f}"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (1, 2 or 5 times a power of ten apart)."""
    if not math.isfinite(low) or not math.isfinite(high):
        return [0.0]
    if high <= low:
        return [low]
    raw = (high - low) / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step - 1e-9) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    return ticks


def _log_ticks(low: float, high: float) -> list[float]:
    return [10.0**e for e in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)]


def default_format(value: float) -> str:
    return f"{value:.3g}"


def scatter_plot(
    *,
    title: str,
    description: str,
    x_label: str,
    y_label: str,
    points: Sequence[Point],
    x_format: Callable[[float], str] = default_format,
    y_format: Callable[[float], str] = default_format,
    y_range: tuple[float, float] | None = None,
    connect: bool = True,
    plot_id: str = "plot",
    x_ticks: Sequence[Tick] | None = None,
) -> Markup:
    """Points over a numeric x axis, joined by a line in x order when `connect`; the x ticks are
    `x_ticks` where given (points at their positions: runs by commit), else round values of x
    read through `x_format`.

    The y axis turns logarithmic when every value is positive and they span more than two
    decades (errors vs a reference often do), and says so in its label.
    """
    ys = [y for p in points for y in (p.y, p.low, p.high) if y is not None]
    log_y = y_range is None and bool(ys) and min(ys) > 0 and max(ys) / min(ys) >= 100
    if y_range is not None:
        y_low, y_high = y_range
    elif ys:
        y_low, y_high = min(ys), max(ys)
        if not log_y:
            y_low = min(0.0, y_low)
    else:
        y_low, y_high = 0.0, 1.0
    if y_high <= y_low:
        y_high = y_low + (abs(y_low) or 1.0)
    if log_y:
        y_ticks = _log_ticks(y_low, y_high)
        y_low, y_high = y_ticks[0], y_ticks[-1]
    else:
        y_ticks = nice_ticks(y_low, y_high)
        y_high = max(y_high, y_ticks[-1])
    xs = [p.x for p in points]
    x_low, x_high = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if x_high <= x_low:
        x_low, x_high = x_low - 1, x_high + 1
    inner_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    inner_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    def sx(x: float) -> float:
        return MARGIN_LEFT + (x - x_low) / (x_high - x_low) * inner_w

    def sy(y: float) -> float:
        if log_y:
            span = math.log10(y_high) - math.log10(y_low)
            fraction = (math.log10(y) - math.log10(y_low)) / span
        else:
            fraction = (y - y_low) / (y_high - y_low)
        return MARGIN_TOP + inner_h - fraction * inner_h

    parts = [_open(plot_id, title, description, WIDTH, HEIGHT, "scatter")]
    bottom = MARGIN_TOP + inner_h
    for tick in y_ticks:
        y = sy(tick)
        parts.append(
            f'<line class="grid" x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" '
            f'y1="{_fmt(y)}" y2="{_fmt(y)}"/>'
            f'<text class="tick" x="{MARGIN_LEFT - 6}" y="{_fmt(y + 4)}" text-anchor="end">'
            f"{escape(y_format(tick))}</text>"
        )
    if x_ticks is None:
        values = nice_ticks(x_low, x_high, 6)
        if xs and all(float(x).is_integer() for x in xs):  # run numbers: no "0.5" or "-0" ticks
            values = [t + 0.0 for t in values if float(t).is_integer()]
        x_ticks = [Tick(value, x_format(value)) for value in values]
    for x_tick in x_ticks:
        x = sx(x_tick.value)
        title = f"<title>{escape(x_tick.title)}</title>" if x_tick.title else ""
        parts.append(
            f'<line class="tickmark" x1="{_fmt(x)}" x2="{_fmt(x)}" y1="{bottom}" '
            f'y2="{bottom + 4}"/><text class="tick x" x="{_fmt(x)}" y="{bottom + 16}" '
            f'text-anchor="middle">{escape(x_tick.text)}{title}</text>'
        )
    parts.append(
        f'<line class="axis" x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" y1="{bottom}" '
        f'y2="{bottom}"/><line class="axis" x1="{MARGIN_LEFT}" x2="{MARGIN_LEFT}" '
        f'y1="{MARGIN_TOP}" y2="{bottom}"/>'
    )
    parts.append(
        f'<text class="axis-label" x="{MARGIN_LEFT + inner_w / 2:.0f}" y="{HEIGHT - 6}" '
        f'text-anchor="middle">{escape(x_label)}</text>'
        f'<text class="axis-label" transform="translate(14 {MARGIN_TOP + inner_h / 2:.0f}) '
        f'rotate(-90)" text-anchor="middle">'
        f"{escape(y_label + (' (log scale)' if log_y else ''))}</text>"
    )
    ordered = sorted(points, key=lambda p: p.x)
    if connect and len(ordered) > 1:
        path = " ".join(
            f"{'M' if i == 0 else 'L'}{_fmt(sx(p.x))},{_fmt(sy(p.y))}"
            for i, p in enumerate(ordered)
        )
        parts.append(f'<path class="series" d="{path}"/>')
    for p in ordered:
        spread = (
            f'<line class="range {escape(p.kind)}" x1="{_fmt(sx(p.x))}" x2="{_fmt(sx(p.x))}" '
            f'y1="{_fmt(sy(p.low))}" y2="{_fmt(sy(p.high))}"/>'
            if p.low is not None and p.high is not None and p.high > p.low
            else ""
        )
        mark = spread + (
            f'<circle class="point {escape(p.kind)}" data-kind="{escape(p.kind)}" '
            f'cx="{_fmt(sx(p.x))}" cy="{_fmt(sy(p.y))}" r="3.5"><title>{escape(p.label)}'
            "</title></circle>"
        )
        parts.append(_linked(mark, p.href))
    parts.append("</svg>")
    return Markup("".join(parts))


def outcome_strip(
    *, title: str, description: str, cells: Sequence[Cell], plot_id: str = "timeline"
) -> Markup:
    """One coloured cell per item, oldest left and newest right, wrapping onto more rows."""
    per_row = max(1, (WIDTH - 8) // (CELL + CELL_GAP))
    rows = max(1, math.ceil(len(cells) / per_row))
    height = MARGIN_TOP + rows * (CELL + CELL_GAP) + 4
    parts = [_open(plot_id, title, description, WIDTH, height, "strip")]
    for i, cell in enumerate(cells):
        row, column = divmod(i, per_row)
        x = 4 + column * (CELL + CELL_GAP)
        y = MARGIN_TOP + row * (CELL + CELL_GAP)
        mark = (
            f'<rect class="cell {escape(cell.state)}" data-state="{escape(cell.state)}" '
            f'x="{x}" y="{y}" width="{CELL}" height="{CELL}" rx="2"><title>'
            f"{escape(cell.label)}</title></rect>"
        )
        parts.append(_linked(mark, cell.href))
    parts.append("</svg>")
    return Markup("".join(parts))


def _open(plot_id: str, title: str, description: str, width: int, height: int, kind: str) -> str:
    pid = escape(plot_id)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot {kind}" id="{pid}" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'aria-labelledby="{pid}-title {pid}-desc">'
        f'<title id="{pid}-title">{escape(title)}</title>'
        f'<desc id="{pid}-desc">{escape(description)}</desc>'
        f'<text class="plot-title" x="{MARGIN_LEFT if kind == "scatter" else 4}" y="16">'
        f"{escape(title)}</text>"
    )


def _linked(mark: str, href: str | None) -> str:
    return f'<a href="{escape(href)}">{mark}</a>' if href else mark
