"""action.yml, the settings object and the README describe the same inputs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cpci.action.settings import PREFIX, ActionSettings, ActionSettingsError

ROOT = Path(__file__).resolve().parents[2]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())


def test_every_input_is_a_setting_and_passed_as_its_env_var() -> None:
    inputs = set(ACTION["inputs"])
    fields = {ActionSettings.input_name(name) for name in ActionSettings.model_fields}
    assert inputs == fields
    step = next(s for s in ACTION["runs"]["steps"] if s.get("id") == "cpci")
    for name in inputs:
        variable = PREFIX + name.upper().replace("-", "_")
        assert step["env"][variable] == f"${{{{ inputs.{name} }}}}"
    assert "inputs." not in step["run"]  # inputs never pasted into the script


def test_defaults_agree_with_action_yml() -> None:
    defaults = ActionSettings()
    for name, spec in ACTION["inputs"].items():
        field = name.replace("-", "_")
        if "${{" in str(spec["default"]):
            continue  # filled in by GitHub (github.token)
        value = getattr(defaults, field)
        assert ("" if value is None else str(value)) == str(spec["default"]), name


def test_readme_documents_every_input_and_output() -> None:
    readme = (ROOT / "README.md").read_text()
    for name in [*ACTION["inputs"], *ACTION["outputs"]]:
        assert f"| `{name}` |" in readme, f"README.md does not document {name}"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"BATCH_SIZE": "0"}, "batch-size: Input should be greater than or equal to 1"),
        ({"RERUNS": "-1"}, "reruns: Input should be greater than or equal to 0"),
        ({"SHARD_INDEX": "2", "SHARD_TOTAL": "2"}, "shard-index must be < shard-total"),
        ({"FAIL_ON": "sometimes"}, "fail-on: Input should be 'new-failures'"),
        ({"SERVER_URL": "https://cpci.example"}, "auth is token but token is empty"),
        ({"SERVER_URL": "cpci.example", "TOKEN": "t"}, "server-url must start with http"),
        ({"MODE": "report"}, "mode report needs server-url"),
    ],
)
def test_bad_inputs_name_the_input(env: dict[str, str], message: str) -> None:
    with pytest.raises(ActionSettingsError, match="bad cpci action input") as excinfo:
        ActionSettings.from_env({PREFIX + k: v for k, v in env.items()})
    assert message in str(excinfo.value)


def test_empty_inputs_keep_their_defaults() -> None:
    settings = ActionSettings.from_env({PREFIX + "BATCH_SIZE": "", PREFIX + "WORKERS": "2"})
    assert settings.batch_size is None  # no cap
    assert settings.workers == 2
    assert "s3cret" not in repr(ActionSettings(token="s3cret", github_token="s3cret"))  # not logged


def test_the_uploads_settings_come_from_the_inputs_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job's own `CPCI_*` variables never stand in for an input the workflow left empty."""
    monkeypatch.setenv("CPCI_TOKEN", "cpci_from_the_job_env")
    monkeypatch.setenv("CPCI_SERVER", "https://elsewhere.example")
    monkeypatch.setenv("CPCI_OIDC_AUDIENCE", "elsewhere")
    inputs = {"SERVER_URL": "https://cpci.example", "AUTH": "oidc", "OIDC_AUDIENCE": "cpci-prod"}
    upload = ActionSettings.from_env({PREFIX + k: v for k, v in inputs.items()}).upload_settings()
    assert (upload.server, upload.auth, upload.oidc_audience) == (
        "https://cpci.example",
        "oidc",
        "cpci-prod",
    )
    assert upload.token is not None
    assert upload.token.get_secret_value() == ""
    # Without the input, the audience is the server URL (the service's default), not the job's.
    inputs = {"SERVER_URL": "https://cpci.example/", "AUTH": "oidc"}
    upload = ActionSettings.from_env({PREFIX + k: v for k, v in inputs.items()}).upload_settings()
    assert upload.token_audience() == "https://cpci.example"


def _env(inputs: dict[str, str]) -> dict[str, str]:
    return {PREFIX + k: v for k, v in inputs.items()}


def test_the_rerun_cap_is_adaptives_only_with_evidence_to_stop_by() -> None:
    service = {"SERVER_URL": "https://cpci.example.com", "TOKEN": "t"}
    assert ActionSettings.from_env(_env(service)).rerun_cap == 5
    assert ActionSettings.from_env(_env({})).rerun_cap == 2  # no server-url: every failure pays it
    assert ActionSettings.from_env(_env({**service, "RERUNS_POLICY": "fixed"})).rerun_cap == 2
    assert ActionSettings.from_env(_env({**service, "RERUNS": "3"})).rerun_cap == 3
