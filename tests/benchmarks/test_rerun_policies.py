"""`benchmarks/rerun_policies.py` at a small size: it runs, prints its table, and the table says
what the rule does (adaptive hides no decidable regression, no reruns hide many, a stop level at
the verdict threshold costs false alarms a stricter one avoids)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(
    r"^(?P<label>.{16})\s+(?P<hidden>\d+) \(\s*(?P<hd>\d+)/\s*(?P<decidable>\d+)\)"
    r" of\s+(?P<regr>\d+)\s+(?P<fa>\d+)/\s*(?P<flaky>\d+) \(\s*[\d.]+%\)"
    r"\s+(?P<reruns>[\d.]+)\s+\(floor (?P<floor>[\d.]+)\)$"
)


def run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "rerun_policies.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_table_compares_the_policies_and_the_frontier_on_a_small_corpus() -> None:
    out = run(
        "--seeds",
        "1",
        "--configs",
        "60",
        "--main-runs",
        "12",
        "--prs",
        "10",
        "--stops",
        "0.2",
        "0.01",
        "--caps",
        "2",
    )
    rows = {" ".join(m["label"].split()[:2]): m for m in map(ROW.match, out.splitlines()) if m}
    assert set(rows) >= {
        "adaptive all",
        "adaptive-5 all",
        "fixed-2 all",
        "none all",
        "0.2 2",
        "0.01 2",
    }, out
    adaptive, none, fixed = rows["adaptive all"], rows["none all"], rows["fixed-2 all"]
    assert int(adaptive["regr"]) > 0, out
    assert int(adaptive["flaky"]) > 0, out
    assert int(adaptive["hd"]) == 0, out  # no decidable regression hidden
    assert int(none["hd"]) > 0, out  # a single failure cannot tell a regression from a flake
    assert float(none["reruns"]) == 0.0
    assert float(adaptive["reruns"]) <= float(fixed["reruns"]), out
    # The frontier's 1% row is the default rule: the same figures as "adaptive".
    assert rows["0.01 2"].group("hidden", "fa", "reruns") == adaptive.group(
        "hidden", "fa", "reruns"
    )
    # Stopping at the verdict's threshold decides rare flakes at their first failure: more
    # false alarms for fewer reruns.
    loose = rows["0.2 2"]
    assert int(loose["fa"]) > int(adaptive["fa"]), out
    assert float(loose["reruns"]) < float(adaptive["reruns"]), out
    assert "goals: decidable hidden 0" in out
