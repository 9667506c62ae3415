"""`cpci action` in test mode: the shard runs, and the job gets a summary, annotations, outputs;
the tests (pytest, each rank, their subprocesses) see none of cpci's credentials, and cpci's OIDC
token is minted before they start and uploads through a live service that checks it."""

from __future__ import annotations

from pathlib import Path

import httpx

from cpci.schema import read_results
from tests.action.conftest import OidcJob
from tests.builders import REPO
from tests.github.gfm import rendered_cells
from tests.prerequisites import import_or_skip
from tests.server.oidc_keys import AUDIENCE
from tests.upload.support import Completed, action_env, run_cpci

import_or_skip("torch", "torch", "test mode runs a torchrun world")

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


PIPES_SUITE = """
import pytest

@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("case", ["a|b", "x`|`y"])
def test_case(case, cpci_dist):
    assert case == "", f"left | right `tick` {case}"
"""


def test_a_pipe_in_a_test_id_keeps_the_summary_table_whole(tmp_path: Path) -> None:
    """Read back with a CommonMark parser with GFM tables, each failing config is one row whose
    cells hold its test id and its message as written."""
    (tmp_path / "test_pipes.py").write_text(PIPES_SUITE)
    done = run_action(
        tmp_path, tests="test_pipes.py", reruns="0", pytest_args="-p no:cacheprovider"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = (tmp_path / "summary.md").read_text()
    table = summary[summary.index("| config |") :]
    rows = rendered_cells(table)
    ids = ["test_pipes.py::test_case[a|b]", "test_pipes.py::test_case[x`|`y]"]
    assert [row[0][0].strip() for row in rows] == ids
    for row, case in zip(rows, ["a|b", "x`|`y"], strict=True):
        assert row[3][1] == f"AssertionError: left | right `tick` {case}"


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


#: The tests' own check, in the parent pytest, in each rank of a world, and in a subprocess of a
#: rank: no input of cpci's, no OIDC request variable; the workflow's own GITHUB_TOKEN is there;
#: and cpci's token was minted before any of them started.
SECRETS_SUITE = """
import json, os, subprocess, sys, urllib.request

import pytest

CHECK = (
    "import os; print(sorted(n for n in os.environ if n.startswith(('CPCI_INPUT_', "
    "'ACTIONS_ID_TOKEN_REQUEST_'))), os.environ.get('GITHUB_TOKEN'))"
)


def seen():
    return subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True).stdout


def test_the_parent_sees_no_credential():
    assert seen() == "[] ghs_the_workflows_own\\n"
    assert json.load(urllib.request.urlopen(os.environ["PROBE_URL"])) == {"minted": 1}
    # cpci's own process is undumpable: its /proc files are root's, not this user's.
    assert os.stat(f"/proc/{os.getppid()}/environ").st_uid == 0


@pytest.mark.cpci(world_size=2)
def test_no_rank_sees_a_credential(cpci_dist):
    assert [n for n in os.environ if n.startswith(("CPCI_INPUT_", "ACTIONS_ID_TOKEN"))] == []
    assert seen() == "[] ghs_the_workflows_own\\n"
"""


def test_the_tests_see_no_credential_and_cpci_mints_its_token_before_them(
    tmp_path: Path, oidc_job: OidcJob
) -> None:
    (tmp_path / "test_secrets.py").write_text(SECRETS_SUITE)
    inputs = action_env(
        tmp_path,
        tests="test_secrets.py",
        server_url=oidc_job.service,
        auth="oidc",
        oidc_audience=AUDIENCE,
        token="cpci_an_input_the_tests_must_not_see",
        github_token="ghs_an_input_the_tests_must_not_see",
        pytest_args="-p no:cacheprovider",
    )
    workflows_own = {"GITHUB_TOKEN": "ghs_the_workflows_own"}  # set for its tests: theirs
    done = run_cpci(tmp_path, "action", env={**inputs, **oidc_job.env, **workflows_own})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    assert "cpci: uploaded 2 result(s)" in done.stdout
    assert oidc_job.minted == ["bearer request-secret"]  # once, before the tests; then reused
    summary = httpx.get(f"{oidc_job.service}/api/v1/repos/{REPO}/runs/act-oidc").json()
    assert summary["outcomes"] == {"passed": 2}
