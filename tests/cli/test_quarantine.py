"""`cpci quarantine` through a real service on loopback: a maintainer's branch token adds and
removes, a PR token and a wrong token are told what to use, the listing says who, why, since when
and the straight passes its release needs; then main's passes release it exactly when that count
is reached, and a config that keeps flaking is never released."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlmodel import Session

from cpci.cli import main
from cpci.schema import QuarantineList
from cpci.server import Settings, create_app
from cpci.server.crud.tokens import create_token
from tests.builders import REPO, config, envelope, record, sha, upload
from tests.live_server import loopback_socket, serve
from tests.upload.support import migrated_database

VICTIM = config("ring")
#: High enough that a handful of passes releases a quarantine (the default asks for hundreds).
RELEASE_RATE = 0.3


@dataclass(frozen=True)
class Maintained:
    url: str
    branch_token: str
    pr_token: str


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Maintained]:
    database = migrated_database(tmp_path)
    with Session(database.engine) as session:
        branch = create_token(session=session, repository=REPO, name="maintainer", scope="branch")
        pr = create_token(session=session, repository=REPO, name="prs", scope="pr")
        session.commit()
    settings = Settings(database_url=database.url, quarantine_release_rate=RELEASE_RATE)
    try:
        with serve(create_app(settings, engine=database.engine)) as url:
            yield Maintained(url, branch.token, pr.token)
    finally:
        database.engine.dispose()


def cpci(
    capsys: pytest.CaptureFixture[str], service: Maintained, *args: str, token: str | None = None
) -> tuple[int, str, str]:
    code = main([*args, "--server", service.url, "--token", token or service.branch_token])
    out, err = capsys.readouterr()
    return code, out, err


def listing(capsys: pytest.CaptureFixture[str], service: Maintained) -> QuarantineList:
    code, out, err = cpci(capsys, service, "quarantine", "list", REPO, "--released", "--json")
    assert code == 0, err
    return QuarantineList.model_validate_json(out)


def test_add_list_remove_and_the_refusals_say_what_to_do(
    capsys: pytest.CaptureFixture[str], service: Maintained
) -> None:
    add = ("quarantine", "add", REPO, VICTIM, "--reason", "flaky since NCCL 2.21, #12")
    code, _, err = cpci(capsys, service, *add, token=service.pr_token)
    assert code == 1
    assert "403" in err
    assert "scope branch" in err
    assert "cpci token create OWNER/REPO --scope branch" in err
    code, _, err = cpci(capsys, service, *add, token="not-a-token")
    assert code == 1
    assert "401" in err
    assert "--token or CPCI_TOKEN" in err
    assert listing(capsys, service).quarantines == []  # nothing written by either

    code, out, err = cpci(capsys, service, *add)
    assert code == 0, err
    assert f"quarantined {VICTIM} by token:" in out
    assert "straight passes on the trusted branch release it" in out
    code, out, _ = cpci(capsys, service, "quarantine", "list", REPO)
    assert code == 0
    assert f"below {RELEASE_RATE:g} at the 95% level" in out
    line = next(x for x in out.splitlines() if x.startswith(VICTIM))
    assert "flaky since NCCL 2.21, #12" in line
    assert "0/0 failed since" in line
    [entry] = listing(capsys, service).quarantines
    assert entry.by.startswith("token:")
    assert entry.passes_to_release > 0

    code, _, err = cpci(capsys, service, *add)
    assert code == 1
    assert "409" in err
    assert "quarantined already" in err
    assert "cpci quarantine remove" in err
    code, out, err = cpci(capsys, service, "quarantine", "remove", REPO, VICTIM)
    assert code == 0, err
    assert out.startswith(f"released {VICTIM} (quarantined since ")
    code, _, err = cpci(capsys, service, "quarantine", "remove", REPO, VICTIM)
    assert code == 1
    assert "404" in err
    assert "is not quarantined" in err
    [ended] = listing(capsys, service).quarantines
    assert (ended.released_by or "").startswith("token:")
    assert ended.release_note == "fixed"


def test_usage_and_an_unreachable_service(
    capsys: pytest.CaptureFixture[str], service: Maintained, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = cpci(capsys, service, "quarantine", "add", REPO, VICTIM)
    assert code == 2
    assert "needs --reason" in err
    code, _, err = cpci(capsys, service, "quarantine", "remove", REPO)
    assert code == 2
    assert "needs OWNER/REPO CONFIG" in err
    code, _, err = cpci(capsys, service, "quarantine", "list", "not-a-repo")
    assert code == 2
    assert "needs OWNER/REPO" in err
    code, _, err = cpci(capsys, service, "quarantine", "list", "acme/unknown")
    assert code == 1
    assert "404" in err
    monkeypatch.delenv("CPCI_SERVER", raising=False)
    code = main(["quarantine", "list", REPO])
    err = capsys.readouterr().err
    assert code == 2
    assert "--server (or CPCI_SERVER) is required" in err
    closed: socket.socket = loopback_socket()  # bound, never listening: refuses connections
    with closed:
        down = f"http://127.0.0.1:{closed.getsockname()[1]}"
        code = main(["quarantine", "list", REPO, "--server", down])
    err = capsys.readouterr().err
    assert code == 1
    assert "no answer from" in err
    assert "check the server URL (--server / CPCI_SERVER" in err


def test_main_releases_it_at_the_pass_count_shown_and_a_flaky_one_never(
    capsys: pytest.CaptureFixture[str], service: Maintained
) -> None:
    flaky = config("flaky")
    for key in (VICTIM, flaky):
        code, _, err = cpci(capsys, service, "quarantine", "add", REPO, key, "--reason", "#7")
        assert code == 0, err
    [needed] = {q.passes_to_release for q in listing(capsys, service).quarantines}
    assert 2 <= needed <= 20
    for k in range(needed):
        upload(
            service.url,
            envelope(
                [record("ring"), record("flaky", "failed" if k % 2 else "passed")],
                commit=sha(k),
                ci_run_id=str(500 + k),
            ),
            token=service.branch_token,
        )
        shown = {q.config: q for q in listing(capsys, service).quarantines}
        if k < needed - 1:
            assert shown[VICTIM].released_at is None
            assert shown[VICTIM].passes_to_release == needed - k - 1
    shown = {q.config: q for q in listing(capsys, service).quarantines}
    assert shown[VICTIM].released_by == "evidence"
    assert f"{needed} of {needed} attempts on main passed" in (shown[VICTIM].release_note or "")
    assert shown[flaky].released_at is None  # half its runs failed: its bound stays high
    assert shown[flaky].evidence.failures == needed // 2
    code, out, _ = cpci(capsys, service, "quarantine", "list", REPO, "--json")
    assert code == 0
    assert [q["config"] for q in json.loads(out)["quarantines"]] == [flaky]
