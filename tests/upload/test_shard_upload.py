"""One shard's upload as `cpci upload` and the Action make it, against a live service: the
receipt, then the ancestry note; while the service is down, the spool and no ancestry call;
without a credential, the upload kept beside the results."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from cpci.upload.errors import CredentialsError
from cpci.upload.retry import Backoff
from cpci.upload.settings import UploadSettings
from cpci.upload.shard_upload import upload_shard
from cpci.upload.spool import Spool
from cpci.upload.unsent import read_unsent
from tests.builders import envelope
from tests.live_server import loopback_socket
from tests.upload.support import LiveService

NO_WAIT = Backoff(attempts=2, sleep=lambda seconds: None)


def settings(server: str, token: str, spool: Path) -> UploadSettings:
    return UploadSettings(server=server, token=SecretStr(token), spool=spool)


def test_a_branch_shard_is_stored_then_its_ancestry_noted(
    service: LiveService, tmp_path: Path
) -> None:
    branch_run = envelope(ci_run_id="shard-1").model_copy(update={"branch": "main"})
    done = upload_shard(
        settings(service.url, service.token, tmp_path / "spool"),
        branch_run,
        {},
        backoff=NO_WAIT,
        cwd=tmp_path,  # not a git checkout
    )
    assert done.delivered.receipt is not None
    assert done.delivered.receipt.status == "stored"
    assert done.ancestry.endswith("commit ancestry not recorded")


def test_while_the_service_is_down_the_shard_waits_in_the_spool(tmp_path: Path) -> None:
    sock = loopback_socket()  # bound, never listening: connections are refused
    try:
        down = f"http://127.0.0.1:{sock.getsockname()[1]}"
        done = upload_shard(
            settings(down, "t", tmp_path / "spool"),
            envelope(ci_run_id="shard-2"),
            {},
            backoff=NO_WAIT,
            cwd=tmp_path,
        )
    finally:
        sock.close()
    assert done.delivered.receipt is None
    assert done.ancestry == ""  # nothing to record history for yet
    assert [i.envelope.ci_run_id for i in Spool(tmp_path / "spool").pending()] == ["shard-2"]


def test_an_upload_without_a_server_does_not_start(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"--server \(or CPCI_SERVER\) is required"):
        upload_shard(
            UploadSettings(server=None, spool=tmp_path),
            envelope(ci_run_id="1"),
            {},
            backoff=NO_WAIT,
            cwd=tmp_path,
        )


def test_an_upload_without_a_credential_is_kept_beside_the_results(tmp_path: Path) -> None:
    """The OIDC token expired while the suite ran and a new one could not be had."""

    def expired() -> str:
        raise CredentialsError("the OIDC token got before the tests expired at 08:05:00 UTC")

    keep = tmp_path / "r.jsonl.unsent.json"
    with pytest.raises(CredentialsError) as refused:
        upload_shard(
            settings("http://127.0.0.1:9", "", tmp_path / "spool"),
            envelope(ci_run_id="shard-3"),
            {},
            backoff=NO_WAIT,
            cwd=tmp_path,
            keep=keep,
            token=expired,
        )
    message = str(refused.value)
    assert message.startswith("the OIDC token got before the tests expired at 08:05:00 UTC. ")
    assert "run shard-3 attempt 1, shard 0/1 of acme/attn at aaaaaaaaaaaa was not sent" in message
    assert f"`cpci upload --resend {keep}`" in message
    kept = read_unsent(keep)
    assert (kept.status, kept.envelope) == (0, envelope(ci_run_id="shard-3"))
    assert Spool(tmp_path / "spool").pending() == []
