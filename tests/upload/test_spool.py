"""The spool attack and its neighbours, with real processes and real HTTP: a spooled item goes
only to its own server, only with credentials for its own repository; a bad file is set aside,
and no file planted in the spool (a FIFO, a symlink to a device, a folder, JSON nested past the
parser's depth) makes an upload fail or hang; one unreachable server holds back no other's
items; two concurrent flushes send each item once."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cpci.cli import main
from cpci.upload.spool import Binding, Spool, default_spool_dir
from tests.builders import REPO, envelope
from tests.live_server import Request, loopback_socket, serve_answers
from tests.upload.support import (
    LiveService,
    receipt_body,
    results_file,
    run_cpci,
    upload_args,
)

OTHER = "acme/other"


class Recorder:
    """A server that records every request it gets (and answers 201): the attacker's URL."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []


@pytest.fixture
def attacker() -> Iterator[tuple[str, Recorder]]:
    recorder = Recorder()

    def answer(request: Request) -> tuple[int, bytes]:
        auth = request.headers.get("authorization", "")
        recorder.seen.append({"path": request.path, "auth": auth})
        return 201, receipt_body()

    with serve_answers(answer) as url:
        yield url, recorder


def shard_args(service: LiveService, tmp_path: Path, run: str) -> list[str]:
    """`cpci upload` of a one-result shard of CI run `run`, one try only."""
    results = results_file(tmp_path / f"r{run}.jsonl", envelope(ci_run_id=run).results)
    extra = ("--commit", "b" * 40, "--ci-run-id", run, "--retries", "1")
    return upload_args(service, tmp_path, results, *extra)


def run_outcomes(service: LiveService, run: str) -> dict[str, int]:
    response = httpx.get(f"{service.url}/api/v1/repos/{REPO}/runs/{run}")
    return dict(response.json()["outcomes"]) if response.status_code == 200 else {}


def test_an_item_naming_another_server_never_gets_this_jobs_token(
    service: LiveService,
    attacker: tuple[str, Recorder],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    evil_url, recorder = attacker
    spool = Spool(tmp_path / "spool")
    planted = spool.put(Binding(evil_url, REPO), envelope(ci_run_id="planted"))
    before = planted.read_bytes(), planted.stat().st_mtime_ns
    assert main(shard_args(service, tmp_path, "s1")) == 0
    assert recorder.seen == []  # the attacker's server saw nothing, least of all the token
    assert (planted.read_bytes(), planted.stat().st_mtime_ns) == before  # left untouched
    assert f"it is for {evil_url}, this upload goes to {service.url}" in capsys.readouterr().err
    assert run_outcomes(service, "planted") == {}


def test_an_item_for_another_repository_is_not_sent_with_this_repositorys_token(
    service: LiveService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spool = Spool(tmp_path / "spool")
    planted = spool.put(
        Binding(service.url, OTHER), envelope(ci_run_id="other-1", repository=OTHER)
    )
    assert main(shard_args(service, tmp_path, "s2")) == 0
    assert planted.exists()
    assert f"it is for {OTHER}, these credentials are for {REPO}" in capsys.readouterr().err
    assert httpx.get(f"{service.url}/api/v1/repos/{OTHER}/runs/other-1").status_code == 404


def test_a_file_rebinding_its_envelope_to_another_repository_is_set_aside(
    service: LiveService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A planted file saying `repository: REPO` over an envelope of OTHER is not trusted."""
    folder = tmp_path / "spool"
    folder.mkdir()
    body = {
        "server": service.url,
        "repository": REPO,
        "envelope": json.loads(
            envelope(ci_run_id="x", repository=OTHER).model_dump_json(by_alias=True)
        ),
    }
    (folder / "upload-forged.json").write_text(json.dumps(body))
    (folder / "upload-garbage.json").write_text("{not json")
    assert main(shard_args(service, tmp_path, "s3")) == 0  # the current upload is not blocked
    err = capsys.readouterr().err
    assert "bound to acme/attn but its envelope is for acme/other" in err
    assert "unreadable" in err
    assert sorted(p.name for p in (folder / "bad").glob("upload-*.json")) == [
        "upload-forged.json",
        "upload-garbage.json",
    ]
    assert "Traceback" not in err


def plant_unreadable_files(folder: Path) -> list[str]:
    """Files under spool names that cannot be read as uploads; returns their names."""
    folder.mkdir(parents=True)
    os.mkfifo(folder / "upload-fifo.json")  # reading it would wait for a writer forever
    (folder / "upload-device.json").symlink_to("/dev/zero")  # reading it would never end
    (folder / "upload-folder.json").mkdir()
    (folder / "upload-deep.json").write_text("[" * 100_000)  # RecursionError in json.loads
    (folder / "upload-latin1.json").write_bytes(b'{"server": "caf\xe9"}')
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("service_up", [True, False], ids=["service-up", "service-down"])
def test_no_file_in_the_spool_stops_the_upload_at_hand(
    service: LiveService, tmp_path: Path, service_up: bool
) -> None:
    """Each planted file is set aside with a note; the upload still goes out, or, with the
    service down, is spooled: in its own process, so a read that never ends fails the test."""
    planted = plant_unreadable_files(tmp_path / "spool")
    down = loopback_socket()  # bound, never listening: connections are refused
    try:
        url = service.url if service_up else f"http://127.0.0.1:{down.getsockname()[1]}"
        args = shard_args(service, tmp_path, "s6")
        args[args.index("--server") + 1] = url
        done = run_cpci(tmp_path, *args)
    finally:
        down.close()
    assert done.returncode == (0 if service_up else 3), done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in (tmp_path / "spool" / "bad").glob("upload-*.json")) == planted
    for name in planted:
        assert f"set aside {tmp_path / 'spool' / 'bad' / name}: unreadable" in done.stderr
    if service_up:
        assert run_outcomes(service, "s6") == {"passed": 1}
    else:
        assert [i.envelope.ci_run_id for i in Spool(tmp_path / "spool").pending()] == ["s6"]


def test_a_file_that_cannot_even_be_set_aside_is_left_with_a_note(
    service: LiveService, tmp_path: Path
) -> None:
    folder = tmp_path / "spool"
    folder.mkdir()
    (folder / "bad").write_text("a file where the folder for unreadable uploads goes")
    (folder / "upload-garbage.json").write_text("{not json")
    done = run_cpci(tmp_path, *shard_args(service, tmp_path, "s7"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"left {folder / 'upload-garbage.json'} where it is (unreadable:" in done.stderr
    assert (folder / "upload-garbage.json").exists()
    assert run_outcomes(service, "s7") == {"passed": 1}


def test_an_unreachable_server_holds_back_no_other_servers_items(
    service: LiveService, tmp_path: Path
) -> None:
    spool = Spool(tmp_path / "spool")
    down = spool.put(Binding("http://127.0.0.1:9", REPO), envelope(ci_run_id="for-down"))
    spool.put(
        Binding(service.url + "/", REPO), envelope(ci_run_id="waiting")
    )  # same server, one slash more
    assert main(shard_args(service, tmp_path, "s4")) == 0
    assert run_outcomes(service, "waiting") == {"passed": 1}
    assert [p.path for p in spool.pending()] == [down]


@pytest.fixture
def meeting_proxy(service: LiveService) -> Iterator[str]:
    """A loopback proxy to the service that holds the first request until a second one arrives:
    two flushing processes are then provably sending at the same time."""
    barrier = threading.Barrier(2, timeout=60)
    arrived = itertools.count()

    def forward(request: Request) -> tuple[int, bytes]:
        if next(arrived) < 2:
            barrier.wait()
        headers = {k: v for k, v in request.headers.items() if k != "host"}
        answer = httpx.post(service.url + request.path, content=request.body, headers=headers)
        return answer.status_code, answer.content

    with serve_answers(forward) as url:
        yield url


def test_two_concurrent_flushes_send_each_item_once(
    service: LiveService, meeting_proxy: str, tmp_path: Path
) -> None:
    spool = Spool(tmp_path / "spool")
    runs = [f"c{i}" for i in range(12)]
    for run in runs:
        spool.put(Binding(meeting_proxy, REPO), envelope(ci_run_id=run))
    before = _uploads(service)
    command = [
        sys.executable,
        "-m",
        "cpci",
        "upload",
        "--flush",
        "--server",
        meeting_proxy,
        "--repository",
        REPO,
        "--token",
        service.token,
        "--spool",
        str(spool.directory),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CPCI_"))}
    flushes = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) for _ in "ab"]
    outputs = [p.communicate(timeout=120)[0] for p in flushes]
    assert [p.returncode for p in flushes] == [0, 0], outputs
    sent = [int(out.split("flushed ")[1].split(" ")[0]) for out in outputs]
    assert sum(sent) == len(runs)  # between them, each item once
    assert min(sent) >= 1  # both really flushed (the proxy made them meet)
    after = _uploads(service)
    assert after["stored"] - before["stored"] == len(runs)
    assert after["duplicate"] == before["duplicate"]  # nothing was sent twice
    assert spool.pending() == []
    assert list(spool.directory.glob("upload-*")) == []


def _uploads(service: LiveService) -> dict[str, float]:
    text = httpx.get(f"{service.url}/metrics").text
    counts = {"stored": 0.0, "duplicate": 0.0}
    for status in counts:
        for line in text.splitlines():
            if line.startswith(f'cpci_uploads_total{{status="{status}"}}'):
                counts[status] = float(line.split()[-1])
    return counts


def test_in_actions_the_spool_is_the_jobs_own_and_bound_to_its_run(
    service: LiveService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    environ = {"RUNNER_TEMP": str(tmp_path / "runner-temp"), "HOME": str(tmp_path)}
    assert default_spool_dir(environ) == tmp_path / "runner-temp" / "cpci-spool"
    assert default_spool_dir({**environ, "CPCI_SPOOL": "/x"}) == Path("/x")
    spool = Spool(tmp_path / "spool")
    earlier = spool.put(Binding(service.url, REPO, "41"), envelope(ci_run_id="r41"))
    mine = spool.put(Binding(service.url, REPO, "42"), envelope(ci_run_id="r42"))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_RUN_ID", "42")
    assert main(shard_args(service, tmp_path, "42")) == 0
    assert not mine.exists()
    assert earlier.exists()  # spooled by another run: not this job's to vouch for
    assert run_outcomes(service, "r42") == {"passed": 1}
    assert run_outcomes(service, "r41") == {}


def test_a_claim_left_by_a_dead_process_is_released(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    path = spool.put(Binding("http://cpci", REPO), envelope(ci_run_id="1"))
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    path.rename(path.with_name(f"{path.name}.claimed-{dead}"))
    assert [item.path for item in spool.pending()] == [path]
