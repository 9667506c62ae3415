"""`cpci action` in test mode: the shard runs, and the job gets a summary, annotations, outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpci.schema import read_results
from tests.upload.support import Completed, action_env, run_cpci

pytest.importorskip("torch", reason="test mode runs a torchrun world")

SUITE = """
import pytest

@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("case", ["ok", "bad<b>@team"])
def test_case(case, cpci_dist):
    assert case == "ok", f"broken: {case}"
"""


def run_action(path: Path, **inputs: str) -> Completed:
    return run_cpci(path, "action", env=action_env(path, **inputs))


def test_test_mode_reports_the_shard(tmp_path: Path) -> None:
    (tmp_path / "test_suite.py").write_text(SUITE)
    result = run_action(
        tmp_path, tests="test_suite.py", fail_on="any-failure", pytest_args="-p no:cacheprovider"
    )
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in result.stdout.splitlines() if line.startswith("::error")]
    assert len(errors) == 1
    assert "file=test_suite.py,line=4,title=cpci failed%3A test_suite.py" in errors[0]
    assert errors[0].endswith("::AssertionError: broken: bad<b>@team")
    summary = (tmp_path / "summary.md").read_text()
    assert "### cpci: 2 configs in shard 1 of 1" in summary
    # Reruns and isolation are on by default: the broken config ran 3 times (isolated first).
    assert "| 1 | 1 | 0 | 4 |" in summary
    bad = [r for r in read_results(str(tmp_path / "cpci-results.jsonl")) if "bad" in r.nodeid]
    assert [(r.attempt, r.outcome) for r in bad] == [(1, "failed"), (2, "failed"), (3, "failed")]
    assert bad[-1].isolation == "fails-alone"
    # Untrusted text: the message is escaped (no HTML, no @mention), the test id is a code span.
    assert "broken: bad&lt;b&gt;@\u2060team |" in summary
    assert "| `test_suite.py::test_case[bad<b>@team]` |" in summary
    outputs = (tmp_path / "outputs.txt").read_text()
    assert "total<<CPCI_EOF\n2\nCPCI_EOF" in outputs
    assert "failed<<CPCI_EOF\n1\nCPCI_EOF" in outputs
    assert (tmp_path / "cpci-results.jsonl.junit.xml").exists()


def test_fail_on_never_keeps_the_job_green_but_not_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "test_suite.py").write_text(SUITE)
    assert (
        run_action(
            tmp_path,
            tests="test_suite.py",
            fail_on="never",
            reruns="0",
            pytest_args="-p no:cacheprovider",
        ).returncode
        == 0
    )
    bad = run_action(tmp_path, tests="test_suite.py", batch_size="zero")
    assert bad.returncode == 2
    assert "::error title=cpci action::bad cpci action input: batch-size" in bad.stdout
