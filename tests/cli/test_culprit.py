"""`cpci culprit` against a real service and the fake GitHub, both on loopback: it prints the
range a config broke in on main, and `--dispatch` asks GitHub to run the midpoint; uploading each
dispatched run's result (what the reusable workflow's culprit job does) narrows the range until
the command names the injected culprit. Refusals say what to do."""

from __future__ import annotations

import httpx
import pytest

from cpci import urls
from cpci.cli import main
from cpci.github.culprit import COMMIT_INPUT, CONFIG_INPUT
from tests.builders import REPO, config, envelope, record, sha, upload
from tests.github.contract import require_reference
from tests.github.fake_github import FakeGitHub
from tests.upload.support import LiveService

VICTIM = config("victim")
COMMITS, BROKEN_FROM = 24, 17
BROKE = "AssertionError: out differs from the reference"


def record_chain(service: LiveService) -> None:
    """main's first-parent links sha(1) -> sha(0), ... (sending them again is fine)."""
    parents = [{"commit": sha(k), "parent": sha(k - 1)} for k in range(1, COMMITS)]
    recorded = httpx.post(
        service.url + urls.api_commits(REPO),
        json={"branch": "main", "parents": parents},
        headers={"Authorization": f"Bearer {service.token}"},
    )
    assert recorded.status_code == 200, recorded.text


def run_at(service: LiveService, k: int, run_id: int, name: str = "victim") -> None:
    """main's run at commit `k`: config `name` fails 3 attempts from BROKEN_FROM on."""
    if k >= BROKEN_FROM:
        results = [record(name, "failed", attempt=a, message=BROKE) for a in (1, 2, 3)]
    else:
        results = [record(name)]
    upload(
        service.url,
        envelope(results, commit=sha(k), ci_run_id=str(run_id)),
        token=service.token,
    )


def test_the_range_is_printed_and_dispatches_bisect_it_to_the_culprit(
    service: LiveService, capsys: pytest.CaptureFixture[str]
) -> None:
    require_reference()
    record_chain(service)
    for k in [*range(10), COMMITS - 1]:
        run_at(service, k, 100 + k)
    ask = ["culprit", REPO, VICTIM, "--server", service.url]
    assert main(ask) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{VICTIM} on main: broken\n")
    assert f"last good: {sha(9)}" in out
    assert f"first bad: {sha(COMMITS - 1)}" in out
    assert f"never ran between them ({COMMITS - 11}, oldest first)" in out
    assert "... and 3 more" in out
    assert "next to run: " in out

    fake = FakeGitHub()
    with fake.serve() as github:
        dispatch = [*ask, "--dispatch", "--github-api-url", github, "--github-token", "ghs_test"]
        for step in range(10):
            assert main(dispatch) == 0
            out = capsys.readouterr().out
            if "broken by" in out:
                break
            repo, workflow, body = fake.dispatches[-1]
            assert (repo, workflow, body["ref"]) == (REPO, "cpci.yml", "main")
            assert body["inputs"][CONFIG_INPUT] == VICTIM
            assert f"running it at {body['inputs'][COMMIT_INPUT]}" in out
            run_at(service, int(body["inputs"][COMMIT_INPUT], 16), 900 + step)
    assert f"culprit: {sha(BROKEN_FROM)}" in out
    assert f"{VICTIM}: broken by {sha(BROKEN_FROM)}" in out
    assert len(fake.dispatches) <= 4  # ceil(log2(14 suspects))


def test_refusals_say_what_to_do(
    service: LiveService, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    require_reference()
    ask = ["culprit", REPO, VICTIM, "--server", service.url]
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    assert main([*ask, "--dispatch"]) == 2
    assert "--github-token or GITHUB_TOKEN" in capsys.readouterr().err
    assert main([*ask, "--branch", "wip"]) == 1
    err = capsys.readouterr().err
    assert "403" in err
    assert "not a trusted branch" in err
    assert "scope branch" not in err  # a read: the service's reason is the whole story
    assert main(["culprit", REPO, config("nobody"), "--server", service.url]) == 1
    assert "404" in capsys.readouterr().err

    record_chain(service)
    for k in [*range(10), COMMITS - 1]:  # enough passes before that a flake is ruled out
        run_at(service, k, 50 + k, "other")
    fake = FakeGitHub()
    fake.fail("POST", "/dispatches", 404, message="Not Found")
    with fake.serve() as github:
        other = ["culprit", REPO, config("other"), "--server", service.url, "--dispatch"]
        code = main([*other, "--github-api-url", github, "--github-token", "ghs_test"])
    err = capsys.readouterr().err
    assert code == 1
    assert "dispatching cpci.yml on main in acme/attn" in err
    assert "workflow_dispatch trigger with the culprit-config and culprit-commit inputs" in err
