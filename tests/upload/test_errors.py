"""One exception tree: every failure the uploader explains is an `UploadError`, and `cpci upload`
turns each into its message and its exit code, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpci.upload import errors
from cpci.upload.settings import UploadSettingsError
from tests.builders import REPO, envelope
from tests.live_server import loopback_socket
from tests.upload.support import Completed, results_file, run_cpci


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (errors.EnvelopeError, 2),
        (errors.CredentialsError, 2),
        (UploadSettingsError, 2),
        (errors.UploadFailed, 1),
        (errors.UploadRefused, 1),
        (errors.SpoolError, 1),
        (errors.JUnitError, 1),
    ],
)
def test_every_error_is_an_upload_error_with_its_exit_code(
    error: type[errors.UploadError], code: int
) -> None:
    assert issubclass(error, errors.UploadError)
    assert error.exit_code == code


def test_retryable_means_a_later_try_may_get_through() -> None:
    assert errors.UploadFailed("no answer").retryable
    assert errors.UploadFailed("busy", 503).retryable
    assert errors.UploadFailed("slow down", 429).retryable
    assert not errors.UploadFailed("refused", 401).retryable
    assert not errors.UploadFailed("invalid", 422).retryable


def cpci_upload(tmp_path: Path, *args: str, **env: str) -> Completed:
    return run_cpci(tmp_path, "upload", *args, env=env)


def test_a_spool_that_cannot_be_written_is_a_message_and_exit_1(tmp_path: Path) -> None:
    """The service is down and the spool path is a file: the user learns both, without a
    traceback, and where the results still are."""
    results = results_file(tmp_path / "r.jsonl", envelope(ci_run_id="1").results)
    blocked = tmp_path / "spool"
    blocked.write_text("not a directory")
    sock = loopback_socket()  # bound, never listening: connections are refused
    try:
        down = f"http://127.0.0.1:{sock.getsockname()[1]}"
        done = cpci_upload(
            tmp_path,
            *("--results", str(results), "--server", down, "--token", "t", "--retries", "1"),
            *("--repository", REPO, "--commit", "a" * 40, "--ci-run-id", "1"),
            *("--spool", str(blocked)),
        )
    finally:
        sock.close()
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert f"cpci upload: cannot spool the upload in {blocked}" in done.stderr
    assert "the results file still has it" in done.stderr
    assert blocked.read_text() == "not a directory"


def test_a_bad_setting_from_the_environment_names_the_flag_and_variable(tmp_path: Path) -> None:
    results = results_file(tmp_path / "r.jsonl", [])
    done = cpci_upload(
        tmp_path, "--results", str(results), CPCI_SERVER="http://127.0.0.1:9", CPCI_AUTH="basic"
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "cpci upload: --auth (or CPCI_AUTH): Input should be 'token' or 'oidc'" in done.stderr
    assert "got 'basic'" in done.stderr


def test_missing_options_are_named_at_once_with_their_variables(tmp_path: Path) -> None:
    done = cpci_upload(tmp_path, "--results", "r.jsonl")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "cpci upload: missing --server (or CPCI_SERVER), --token (or CPCI_TOKEN; `cpci token "
        "create OWNER/REPO` makes one), --repository (or GITHUB_REPOSITORY) and --commit (or "
        f"GITHUB_SHA; {tmp_path} is not in a git checkout)"
    ]
