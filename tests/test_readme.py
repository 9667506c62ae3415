"""README.md says what the code does: the service settings table is the code's own, and the
service steps work in the order written, on a fresh database."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from cpci import urls
from cpci.schema import ResultRecord
from cpci.server.core.config import reference_markdown
from cpci.server.devpg import free_port
from tests.upload.support import git_checkout

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_service_settings_table_matches_the_code() -> None:
    start = README.index("<!-- settings:begin -->\n") + len("<!-- settings:begin -->\n")
    end = README.index("<!-- settings:end -->")
    assert README[start:end] == reference_markdown(), (
        "README.md's settings table is out of date: paste cpci.server.core.config."
        "reference_markdown() between the settings markers"
    )


def test_quick_start_has_the_two_commands() -> None:
    quick = README[README.index("## Quick start") : README.index("## The batched runner")]
    assert "make demo" in quick
    assert "make test" in quick


#: What the service steps' placeholders stand for here: a repository, this machine, a free port.
PLACEHOLDERS = {"OWNER/REPO": "acme/attn", "0.0.0.0": "127.0.0.1", "HOST": "127.0.0.1"}


def service_steps() -> list[list[str]]:
    """The commands of the README's shell block under "The result service", in order, each
    split as a shell would (comments dropped); the `pip install` is this checkout's venv."""
    section = README[README.index("## The result service") :]
    start = section.index("```sh\n") + len("```sh\n")
    block = section[start : section.index("```\n", start)]
    steps = [shlex.split(line, comments=True) for line in block.splitlines()]
    return [step for step in steps if step and step[:2] != ["pip", "install"]]


def test_the_service_steps_run_in_order_on_a_fresh_database(tmp_path: Path) -> None:
    """A first try, as a newcomer types it: in a checkout with a results file and no database,
    the README's steps one after the other, `cpci serve` a process of its own."""
    steps = service_steps()
    assert [step[:2] for step in steps] == [
        ["cpci", "token"],
        ["cpci", "serve"],
        ["cpci", "upload"],
    ]
    checkout = tmp_path / "attn"
    git_checkout(checkout, branch="trial")
    record = ResultRecord(nodeid="t.py::test[p2p]", world_size=2, outcome="passed", duration_s=1)
    (checkout / "results.jsonl").write_text(record.to_json_line())
    port = str(free_port())
    values = {**PLACEHOLDERS, "8000": port}

    def command(step: list[str], **more: str) -> list[str]:
        for placeholder, value in {**values, **more}.items():
            step = [word.replace(placeholder, value) for word in step]
        return [sys.executable, "-m", "cpci", *step[1:]]

    env = {k: v for k, v in os.environ.items() if not k.startswith(("CPCI_", "GITHUB_"))}
    made = subprocess.run(
        command(steps[0]), cwd=checkout, env=env, capture_output=True, text=True, timeout=120
    )
    assert made.returncode == 0, made.stderr
    assert "was empty: applied its migrations first" in made.stderr
    token = made.stdout.splitlines()[0]
    with serving(command(steps[1]), checkout, env) as url:
        assert url == f"http://127.0.0.1:{port}"
        sent = subprocess.run(
            command(steps[2], **{"cpci_...": token}),
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert sent.returncode == 0, sent.stdout + sent.stderr
        assert "from git in" in sent.stderr
        page = next(line for line in sent.stdout.splitlines() if line.startswith("run page: "))
        run_url = page.removeprefix("run page: ")
        assert run_url.startswith(f"{url}/ui/acme/attn/runs/local-")
        assert httpx.get(run_url, timeout=30).status_code == 200
        ci_run_id = run_url.rsplit("/", 1)[1]
        run = httpx.get(f"{url}{urls.api_run_summary('acme/attn', ci_run_id)}", timeout=30).json()
    assert (run["configs"], run["outcomes"]) == (1, {"passed": 1})
    assert run["run"]["branch"] == "trial"


@contextmanager
def serving(command: list[str], cwd: Path, env: dict[str, str]) -> Iterator[str]:
    """`command` (a `cpci serve`) running; yields the URL it says it listens on, once it does."""
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert process.stdout is not None
    try:
        said = []
        for line in process.stdout:  # uvicorn says so once it listens; EOF if it exits
            said.append(line)
            found = re.search(r"Uvicorn running on (http://\S+)", line)
            if found:
                break
        else:
            raise AssertionError(f"cpci serve exited with {process.wait()}:\n{''.join(said)}")
        yield found.group(1)
    finally:
        process.terminate()
        process.wait(timeout=30)
        process.stdout.close()
