"""The one verdict table: dependency-free, and in step with the report, the gate and the UI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cpci.github.gate import failing_configs, gate
from cpci.schema import PullRequestReport
from cpci.schema.verdicts import ATTENTION, BY_NAME, FAILING, GATING, VERDICTS, count_text, info
from tests.builders import report, verdict


def test_the_table_imports_nothing_of_cpci() -> None:
    # Run the module's file alone: importing it by name would load the schema package first.
    code = (
        "import runpy, sys; runpy.run_path('cpci/schema/verdicts.py'); "
        "bad = sorted(m for m in sys.modules if m.startswith('cpci') or m == 'pydantic'); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_section_is_a_field_of_the_report() -> None:
    fields = PullRequestReport.model_fields
    for name in ATTENTION:
        assert info(name).field in fields
    assert [v.name for v in VERDICTS][: len(ATTENTION)] == list(ATTENTION)


#: The policy, written out apart from the table it checks (docs/verdicts.md's table): a new
#: failure and a config flaky on its arrival runs (a flaky test being added) are the PR's to
#: fix; these verdicts' configs fail at head. A quarantined config neither fails nor gates.
GATES = {"new_failure", "flaky_on_arrival"}
FAILS_AT_HEAD = {
    "new_failure",
    "flaky_on_arrival",
    "no_baseline",
    "infra",
    "flaky",
    "broken_at_base",
}


def test_the_gate_fails_exactly_on_the_gating_verdicts() -> None:
    assert {v.name for v in VERDICTS if v.gates} == GATES
    assert FAILING == FAILS_AT_HEAD
    for v in VERDICTS:
        if not v.field or v.name == "pending":
            continue
        sections: dict[str, Any] = {v.field: [verdict("x", v.name)]}
        one = report(**sections)
        assert (gate(one, None) == "failure") == (v.name in GATES), v.name
        assert (gate(one, None, "any-failure") == "failure") == (v.name in FAILS_AT_HEAD), v.name
        assert failing_configs(one) == (1 if v.name in FAILS_AT_HEAD else 0), v.name


def test_counts_read_in_the_tables_order() -> None:
    assert count_text({"flaky": 1, "new_failure": 2, "fixed": 3}) == "2 new failure(s), 1 flaky"
    counted = {"flaky": 1, "flaky_on_arrival": 2, "new_failure": 3, "quarantined": 4}
    assert count_text(counted) == "3 new failure(s), 2 flaky on arrival, 1 flaky"
    assert count_text(counted, GATING) == "3 new failure(s), 2 flaky on arrival"
    assert {n for n, v in BY_NAME.items() if v.failing} == FAILING
    with pytest.raises(ValueError, match="unknown verdict 'red'"):
        info("red")
