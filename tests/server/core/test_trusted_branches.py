"""Only the base branch judges a PR: end to end through a real uvicorn on both engines.

Each case uploads what CI would (main's history with a `branch` token, a PR with a `pr` token),
adds what other branches' CI would add (a `wip` run at the PR's base commit, flip-flops on a
feature branch's own commits), and reads the PR report as the bot does: the regression stays a
NEW FAILURE, a PR whose base branch is untrusted gets NO BASELINE with that reason, and commit
ancestry is taken from trusted branches only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine
from sqlmodel import Session, select

from cpci.schema import RunEnvelope
from cpci.server import Settings, create_app
from cpci.server.core.trusted_branches import TrustedBranches
from cpci.server.crud.repos import remember_default_branch
from cpci.server.crud.tokens import create_token
from cpci.server.models import CommitParent, Repository
from tests.builders import REPO, config, envelope, record, send, sha
from tests.live_server import serve
from tests.server.oidc_keys import Keys, oidc_service

REGRESSED = "a"
FAILURE = "AssertionError: max abs err 0.9 > 1e-3"
#: How config `a` fails on the branches here (a flake's failure, or a break's).
BRANCH_FAILURE = "AssertionError: flaky tolerance 2e-3"
#: The base commit every PR here is based on: main's 12th run.
BASE_RUN = 12
HEAD = "f" * 40


class Service:
    """A live service with a `branch` and a `pr` upload token of REPO."""

    def __init__(self, url: str, tokens: dict[str, str]) -> None:
        self.url, self.tokens = url, tokens

    def upload(self, body: RunEnvelope, scope: str = "branch", expect: int = 201) -> None:
        response = send(self.url, body, token=self.tokens[scope])
        assert response.status_code == expect, response.text

    def commits(self, bearer: str, branch: str | None, *links: tuple[str, str]) -> httpx.Response:
        body: dict[str, Any] = {"parents": [{"commit": c, "parent": p} for c, p in links]}
        if branch is not None:
            body["branch"] = branch
        return httpx.post(
            f"{self.url}/api/v1/repos/{REPO}/commits",
            json=body,
            headers={"Authorization": f"Bearer {bearer}"},
        )

    def verdict(self, number: int, name: str = REGRESSED) -> tuple[str, str]:
        """The (verdict, reason) of config `name` in PR `number`'s report."""
        report = httpx.get(f"{self.url}/api/v1/repos/{REPO}/pulls/{number}/report").json()
        for section in report.values():
            for item in section if isinstance(section, list) else ():
                if isinstance(item, dict) and item.get("config") == config(name):
                    return item["verdict"], item["reason"]
        return "passed", ""

    def baseline_note(self, number: int) -> str:
        report = httpx.get(f"{self.url}/api/v1/repos/{REPO}/pulls/{number}/report").json()
        return str(report["baseline"]["note"])


def tokens_of(engine: Engine) -> dict[str, str]:
    with Session(engine) as session:
        made = {
            scope: create_token(session=session, repository=REPO, scope=scope).token
            for scope in ("branch", "pr")
        }
        session.commit()
    return made


@pytest.fixture
def live(engine: Engine, db_url: str) -> Iterator[Callable[..., Service]]:
    """Start a live service with extra settings (one per test)."""
    stack: list[Any] = []

    def start(**settings: Any) -> Service:
        app = create_app(Settings(database_url=db_url, **settings), engine=engine)
        context = serve(app)
        stack.append(context)
        return Service(context.__enter__(), tokens_of(engine))

    yield start
    for context in reversed(stack):
        context.__exit__(None, None, None)


def main_history(
    service: Service, outcomes: str = "P" * BASE_RUN, branch: str = "main", first: int = 1
) -> None:
    """Runs of `branch` on commits `sha(first)` on, one each: config `a` passes (P) or fails
    (F) per run."""
    for n, outcome in enumerate(outcomes, start=first):
        failed = outcome == "F"
        results = [
            record(
                REGRESSED,
                "failed" if failed else "passed",
                message=BRANCH_FAILURE if failed else None,
            ),
            record("b"),
        ]
        service.upload(envelope(results, commit=sha(n), ci_run_id=f"{branch}-{n}", branch=branch))


def regressed_pull(
    service: Service,
    number: int = 7,
    *,
    base_branch: str | None = "main",
    base: str = "",
    message: str = FAILURE,
) -> None:
    """PR `number`: config `a` fails all three attempts at its head with `message`."""
    results = [record(REGRESSED, "failed", attempt=k, message=message) for k in (1, 2, 3)]
    fields: dict[str, Any] = {"base_branch": base_branch} if base_branch else {}
    service.upload(
        envelope(
            [*results, record("b")],
            commit=HEAD,
            branch=f"feature-{number}",
            pull_request=number,
            base_commit=base or sha(BASE_RUN),
            ci_run_id=f"pr-{number}",
            **fields,
        ),
        scope="pr",
    )


def test_another_branchs_failing_run_at_the_base_commit_leaves_the_regression_new(
    live: Callable[..., Service],
) -> None:
    service = live()
    main_history(service)
    wip = [record(REGRESSED, "failed", message="AssertionError: wip"), record("b")]
    service.upload(envelope(wip, commit=sha(BASE_RUN), ci_run_id="wip-at-base", branch="wip"))
    regressed_pull(service)
    assert service.verdict(7)[0] == "new_failure"
    assert service.baseline_note(7) == f"base {sha(BASE_RUN)[:12]} on main"


def test_a_base_commit_run_only_by_another_branch_is_no_baseline(
    live: Callable[..., Service],
) -> None:
    service = live()
    wip = [record(REGRESSED, "failed", message=FAILURE), record("b")]
    service.upload(envelope(wip, commit=sha(BASE_RUN), ci_run_id="wip-at-base", branch="wip"))
    regressed_pull(service)
    verdict, reason = service.verdict(7)
    assert verdict == "no_baseline"
    assert f"no complete run of main at base {sha(BASE_RUN)[:12]}" in reason


def test_another_branchs_flip_flops_do_not_make_a_regression_flaky(
    live: Callable[..., Service],
) -> None:
    service = live()
    main_history(service)
    main_history(service, "PFPFPFPFPFPF", branch="wip", first=100)  # on its own commits
    regressed_pull(service)
    verdict, reason = service.verdict(7)
    assert verdict == "new_failure", reason
    flaky = httpx.get(f"{service.url}/api/v1/repos/{REPO}/flaky").json()
    assert flaky["configs"] == []  # main's list: wip's flip-flops are wip's own
    on_wip = httpx.get(f"{service.url}/api/v1/repos/{REPO}/flaky", params={"branch": "wip"})
    assert [c["config"] for c in on_wip.json()["configs"]] == [config(REGRESSED)]


def test_a_pull_request_into_an_untrusted_branch_gets_no_baseline_saying_why(
    live: Callable[..., Service],
) -> None:
    service = live()
    main_history(service, branch="wip")
    regressed_pull(service, base_branch="wip")
    verdict, reason = service.verdict(7)
    assert verdict == "no_baseline"
    assert "the base branch wip is not a trusted branch" in reason
    assert "default branch" in reason


def test_a_run_without_base_branch_is_compared_with_the_default_trusted_branch(
    live: Callable[..., Service],
) -> None:
    service = live()
    main_history(service)
    regressed_pull(service, base_branch=None)
    assert service.verdict(7)[0] == "new_failure"


def test_release_branches_judge_the_pull_requests_into_them(
    live: Callable[..., Service],
) -> None:
    service = live(trusted_branches=("main", "release/*"))
    main_history(service, branch="release/2.1")
    main_history(service, "F" * BASE_RUN, branch="main")  # main is broken; release is not
    regressed_pull(service, base_branch="release/2.1")
    assert service.verdict(7)[0] == "new_failure"
    regressed_pull(service, 8, base_branch="main", message=BRANCH_FAILURE)
    assert service.verdict(8)[0] == "broken_at_base"
    main_history(service, branch="release/2.1/hotfix")  # `*` stays within one part
    regressed_pull(service, 9, base_branch="release/2.1/hotfix")
    assert "is not a trusted branch" in service.verdict(9)[1]


def test_the_default_branch_github_reports_is_the_trusted_one(
    live: Callable[..., Service], engine: Engine
) -> None:
    service = live()
    main_history(service, branch="trunk")
    with Session(engine) as session:
        remember_default_branch(session=session, name=REPO, branch="trunk")
        session.commit()
    regressed_pull(service, base_branch=None)
    assert service.verdict(7)[0] == "new_failure"
    regressed_pull(service, 8, base_branch="main")
    assert "the base branch main is not a trusted branch" in service.verdict(8)[1]


# --- a flaky base is weighed like the head ------------------------------------------------

#: Twelve runs of a config that fails now and then, in separate stretches: known flaky.
FLAKY_HISTORY = "PPFPPPPFPPPP"


def test_a_flaky_configs_chance_failure_at_the_base_does_not_hide_a_regression(
    live: Callable[..., Service],
) -> None:
    service = live()
    main_history(service, FLAKY_HISTORY + "PPPPPPPPF")  # its one attempt at the base failed
    base = sha(len(FLAKY_HISTORY) + 9)
    regressed_pull(service, base=base, message=BRANCH_FAILURE)
    verdict, reason = service.verdict(7)
    assert verdict == "new_failure", reason
    assert "its flakiness explains its failures at the base (failed 1/1 attempt" in reason
    assert "judged as if the base passed" in reason


def test_a_stable_config_that_fails_at_the_base_is_broken_at_base(
    live: Callable[..., Service],
) -> None:
    service = live()
    main_history(service, "P" * 20 + "F")
    regressed_pull(service, base=sha(21), message=BRANCH_FAILURE)
    verdict, reason = service.verdict(7)
    assert verdict == "broken_at_base", reason
    assert reason == "fails at base too"


def test_a_head_that_fails_otherwise_than_the_broken_base_is_a_new_failure(
    live: Callable[..., Service],
) -> None:
    service = live()
    main_history(service, "P" * 17 + "FFFF")
    regressed_pull(service, base=sha(21))
    verdict, reason = service.verdict(7)
    assert verdict == "new_failure", reason
    assert f"fails at the base too, but with another error ({BRANCH_FAILURE})" in reason


@pytest.mark.parametrize(
    ("streak", "says"),
    [
        (2, "its flakiness does not explain its failures at the base and in the base-branch run"),
        (3, "fails at base too, as in the 2 base-branch runs before it"),
    ],
)
def test_a_flaky_config_failing_in_consecutive_base_runs_is_broken_at_base(
    live: Callable[..., Service], streak: int, says: str
) -> None:
    service = live()
    main_history(service, FLAKY_HISTORY + "PPPPPPPP" + "F" * streak)
    regressed_pull(service, base=sha(len(FLAKY_HISTORY) + 8 + streak), message=BRANCH_FAILURE)
    verdict, reason = service.verdict(7)
    assert verdict == "broken_at_base", reason
    assert says in reason


# --- ancestry comes from trusted branches only --------------------------------------------


def test_ancestry_from_an_untrusted_branch_is_refused_and_main_still_records_its_own(
    engine: Engine, db_url: str, keys: Keys
) -> None:
    child, parent, forged = sha(2), sha(1), sha(99)
    with oidc_service(db_url=db_url, keys=keys, engine=engine) as url:
        service = Service(url, tokens_of(engine))
        wip = keys.token(ref="refs/heads/wip", sub=f"repo:{REPO}:ref:refs/heads/wip")
        refused = service.commits(wip, None, (child, forged))
        assert refused.status_code == 403
        assert "branch wip is not a trusted branch" in refused.json()["detail"]
        claimed = service.commits(wip, "main", (child, forged))
        assert claimed.status_code == 403
        assert "may record the history of branch wip only" in claimed.json()["detail"]
        nameless = service.commits(service.tokens["branch"], None, (child, forged))
        assert nameless.status_code == 403
        assert '"branch"' in nameless.json()["detail"]
        assert service.commits(keys.token(), None, (child, parent)).json() == {"recorded": 1}
    with Session(engine) as session:
        stored = session.exec(select(CommitParent.parent, CommitParent.trusted)).all()
    assert stored == [(parent, True)]


def test_a_trusted_link_replaces_one_recorded_before_trust_was_checked(
    live: Callable[..., Service], engine: Engine
) -> None:
    service = live()
    child, parent, forged = sha(2), sha(1), sha(99)
    assert service.commits(service.tokens["branch"], "main", (sha(3), child)).status_code == 200
    with Session(engine) as session:
        repo_id = session.exec(select(Repository.id).where(Repository.name == REPO)).one()
        assert repo_id is not None
        session.add(CommitParent(repository_id=repo_id, commit=child, parent=forged, trusted=False))
        session.commit()
    recorded = service.commits(service.tokens["branch"], "main", (child, parent))
    assert recorded.json() == {"recorded": 1}
    clash = service.commits(service.tokens["branch"], "main", (child, forged))
    assert clash.status_code == 409
    with Session(engine) as session:
        row = session.exec(select(CommitParent).where(CommitParent.commit == child)).one()
    assert (row.parent, row.trusted) == (parent, True)


# --- the rule on its own --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patterns", "default", "branch", "trusted"),
    [
        ((), None, "main", True),
        ((), None, "master", False),
        ((), "master", "master", True),
        ((), "master", "main", False),
        (("main", "release/*"), None, "release/2.1", True),
        (("main", "release/*"), None, "release/2.1/rc", False),
        (("release/**",), None, "release/2.1/rc", True),
        (("release/*",), "main", "main", False),
        ((), None, None, False),
    ],
)
def test_which_branches_are_trusted(
    patterns: tuple[str, ...], default: str | None, branch: str | None, trusted: bool
) -> None:
    assert TrustedBranches(patterns).trusts(branch, default) is trusted


def test_the_default_trusted_branch_is_the_repositorys_when_trusted_else_the_first_named() -> None:
    assert TrustedBranches().default_branch(None) == "main"
    assert TrustedBranches().default_branch("trunk") == "trunk"
    assert TrustedBranches(("release/*", "stable")).default_branch("main") == "stable"
    assert TrustedBranches(("main", "release/*")).default_branch("main") == "main"


def test_a_blank_trusted_branch_pattern_is_refused_naming_the_setting() -> None:
    with pytest.raises(ValueError, match="CPCI_TRUSTED_BRANCHES entries must be"):
        Settings(trusted_branches=(" main",))
