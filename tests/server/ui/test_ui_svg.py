"""Server-side plots, failure signatures and the small judgements the pages make."""

from __future__ import annotations

import itertools
import re

import pytest

from cpci.evidence import signature
from cpci.schema.verdicts import quick_verdict
from cpci.server.ui.svg import Cell, Point, nice_ticks, outcome_strip, scatter_plot
from cpci.server.views.config_overview import works_elsewhere
from cpci.server.views.read_models import PlaceStats


def test_scatter_escapes_text_and_draws_one_mark_per_point() -> None:
    points = [
        Point(float(i), float(i * i), f"<b>{i}</b>", "fail" if i % 2 else "ok") for i in range(5)
    ]
    svg = str(
        scatter_plot(
            title="<script>t</script>",
            description="d & e",
            x_label="x<",
            y_label="y>",
            points=points,
        )
    )
    assert "<script>" not in svg
    assert "<b>" not in svg
    assert "&lt;script&gt;t&lt;/script&gt;" in svg
    assert "d &amp; e" in svg
    assert 'role="img"' in svg
    assert "<desc" in svg
    assert svg.count("<circle") == 5
    assert svg.count('class="point fail"') == 2


def test_scatter_log_scale_when_values_span_decades() -> None:
    points = [Point(0, 1e-6, ""), Point(1, 1e-3, "")]
    assert "(log scale)" in str(
        scatter_plot(title="t", description="", x_label="x", y_label="err", points=points)
    )
    linear = [Point(0, 1.0, ""), Point(1, 2.0, "")]
    assert "(log scale)" not in str(
        scatter_plot(title="t", description="", x_label="x", y_label="s", points=linear)
    )


def test_scatter_survives_no_points_and_one_point() -> None:
    for points in ([], [Point(3.0, 3.0, "only")]):
        svg = str(scatter_plot(title="t", description="", x_label="x", y_label="y", points=points))
        assert svg.count("<circle") == len(points)
        assert "nan" not in svg


def test_strip_keeps_order_links_and_wraps() -> None:
    cells = [Cell("fail" if i == 99 else "pass", f"c{i}", f"/run/{i}?a=1&b=2") for i in range(100)]
    svg = str(outcome_strip(title="t", description="", cells=cells))
    assert svg.count("<rect") == 100
    assert re.findall(r'data-state="(\w+)"', svg)[-1] == "fail"  # newest last (right)
    assert 'href="/run/0?a=1&amp;b=2"' in svg
    ys = {float(y) for y in re.findall(r'<rect [^>]* y="([\d.]+)"', svg)}
    assert len(ys) == 3  # 100 cells of 16 px do not fit in one 720 px row


@pytest.mark.parametrize(("low", "high"), [(0, 1), (0, 97), (0.001, 0.0042), (-3, 7)])
def test_nice_ticks_cover_the_range_with_round_steps(low: float, high: float) -> None:
    ticks = nice_ticks(low, high)
    assert ticks[0] >= low
    assert ticks[-1] <= high + 1e-9
    steps = {round(b - a, 9) for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1
    mantissa = f"{steps.pop():e}".split("e")[0]
    assert mantissa in ("1.000000", "2.000000", "5.000000")


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("timeout after 30.5s on rank 3", "timeout after Ns on rank N"),
        ("bad ptr 0x7ffee3 in /opt/conda/lib/x.so\nmore", "bad ptr <addr> in <path>"),
        ("commit 0123456789abcdef0123 broke", "commit <sha> broke"),
        ("   ", "(no message)"),
    ],
)
def test_signature_drops_what_changes_between_runs(message: str, expected: str) -> None:
    assert signature(message) == expected


def place(name: str, passes: int, failures: int) -> PlaceStats:
    rate = passes / (passes + failures) if passes + failures else None
    return PlaceStats(
        name=name, results=passes + failures, passes=passes, failures=failures, pass_rate=rate
    )


def test_works_elsewhere_needs_a_bad_host_and_healthy_others() -> None:
    assert "gpu-b" in (works_elsewhere([place("gpu-a", 10, 0), place("gpu-b", 1, 5)]) or "")
    assert works_elsewhere([place("gpu-a", 5, 5), place("gpu-b", 1, 5)]) is None  # bad test
    assert works_elsewhere([place("gpu-a", 10, 0), place("gpu-b", 0, 2)]) is None  # too few


def test_quick_verdict() -> None:
    assert quick_verdict({"new_failure": 3}, pending=True) == "pending"
    assert quick_verdict({"passed": 5, "fixed": 1}, pending=False) == "passing"
    assert quick_verdict({"new_failure": 1, "flaky": 1}, pending=False) == "new_failures"
    assert quick_verdict({"broken_at_base": 2}, pending=False) == "failing"
    assert quick_verdict({"flaky": 2, "infra": 1}, pending=False) == "failing"


def test_a_single_run_gets_whole_number_ticks() -> None:
    svg = str(
        scatter_plot(
            title="t",
            description="d",
            x_label="run",
            y_label="pass rate",
            points=[Point(0.0, 1.0, "run 0")],
            x_format=lambda v: f"{v:.0f}",
        )
    )
    ticks = re.findall(
        r'class="tick x" x="[^"]*" y="[^"]*" text-anchor="middle">([^<]*)</text>', svg
    )
    assert ticks == ["-1", "0", "1"]
