"""`benchmarks/early_detection.py` at a small size: it runs and prints its table, and the shares
caught per CI run are the ones the runner's rules imply."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(
    r"^(?P<k>\d) (?P<kind>gates|shown)  (?P<rates>.*) \| R=1: .* \|"
    r" (?P<flaky>[\d.]+) / (?P<clean>\d+)$"
)
RATE = re.compile(r"(\d\.\d\d):\s+(\d+)%")


def shown_once(p: float, k: int, cap: int = 5) -> float:
    """One CI run shows a new flake at rate p with a pass and a failure: it passes its first
    attempt and one of its k arrival runs fails, or it fails first and one of its reruns passes
    (up to the cap: no history to decide by)."""
    return (1 - p) * (1 - (1 - p) ** k) + p * (1 - p**cap)


def gated_once(p: float, k: int) -> float:
    """One CI run gates it (FLAKY ON ARRIVAL): whenever it is shown, once it is run as new (K >
    0: its arrival runs and its reruns are marked so); with K = 0 it is plain flaky."""
    return shown_once(p, k) if k else 0.0


def test_the_table_shows_each_k_with_the_shares_the_rules_imply() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "early_detection.py"),
            "--seeds",
            "1",
            "--configs",
            "400",
            "--pr-runs",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = {(int(m["k"]), m["kind"]): m for m in map(ROW.match, done.stdout.splitlines()) if m}
    assert set(rows) == {(k, kind) for k in (0, 1, 2, 3) for kind in ("gates", "shown")}, (
        done.stdout
    )
    for (k, kind), m in rows.items():
        shares = {float(r): int(s) / 100 for r, s in RATE.findall(m["rates"])}
        assert set(shares) == {0.1, 0.15, 0.2, 0.25, 0.3}
        expect = gated_once if kind == "gates" else shown_once
        for p, share in shares.items():
            # 400 draws: a standard error of at most 2.5 points; 8 points is over 3 of them.
            assert abs(share - expect(p, k)) < 0.08, (k, kind, p, share, done.stdout)
        assert int(m["clean"]) == k  # a new config that never fails costs its K runs
    extra = [float(rows[k, "gates"]["flaky"]) for k in (0, 1, 2, 3)]
    assert extra == sorted(extra), extra
    assert extra[0] > 0  # a failing first attempt of a new config is rerun even at K = 0
    assert "goal: >= 90% of rate >= 0.2 caught at K = 2" in done.stdout
