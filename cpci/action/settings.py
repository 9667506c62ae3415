"""The Action's inputs: one validated object, built from the `CPCI_INPUT_*` variables.

`action.yml` hands every input over as an environment variable of the same name (upper-cased,
dashes as underscores, prefixed `CPCI_INPUT_`), never by pasting it into a script; this is the one
place they are read and checked. A test keeps this model, `action.yml` and the README in step.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from cpci.evidence import DEFAULT_CAPS, RerunMode
from cpci.github import CommentMode, FailOn
from cpci.upload.credentials import AuthMethod
from cpci.upload.settings import UploadSettings

PREFIX = "CPCI_INPUT_"


class ActionSettingsError(ValueError):
    """An input has a bad value; the message names the input as the workflow spells it."""


class ActionSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["test", "report"] = "test"
    tests: str = "tests"
    #: The most configs one world runs (None: no cap, worlds take their queue to the end).
    batch_size: int | None = Field(default=None, ge=1)
    workers: int = Field(default=1, ge=1)
    #: The most same-commit reruns of a failed config; None: the policy's default
    #: (`cpci.evidence.DEFAULT_CAPS`: 5 under adaptive with a server-url, else 2), `rerun_cap`.
    reruns: int | None = Field(default=None, ge=0)
    #: adaptive: a failure is rerun only while the base branch's evidence cannot decide it.
    reruns_policy: RerunMode = "adaptive"
    #: Extra fresh-world runs of a config new to the base branch or whose test file changed.
    new_config_runs: int = Field(default=2, ge=0)
    shard_index: int = Field(default=0, ge=0)
    shard_total: int = Field(default=1, ge=1)
    #: The matrix leg: a name, or a JSON list of runner labels (uploaded sorted, comma-joined).
    leg: str = ""
    server_url: str = ""
    auth: AuthMethod = "token"
    token: str = Field(default="", repr=False)
    #: Empty: the server URL, which is the service's own default audience (CPCI_PUBLIC_URL).
    oidc_audience: str = ""
    pytest_args: str = ""
    fail_on: FailOn = "new-failures"
    comment: CommentMode = "edit"
    pull_request: int | None = Field(default=None, ge=1)
    github_token: str = Field(default="", repr=False)
    python: str = "python3"
    results: str = "cpci-results.jsonl"
    #: What shards balance by: `service` (fetched before planning, the same for every shard),
    #: `cache` (this runner's pytest cache), or a durations file.
    durations: str = Field(default="service", min_length=1)
    #: The branch whose durations are fetched; empty: the repository's default branch.
    durations_branch: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> ActionSettings:
        if self.shard_index >= self.shard_total:
            raise ValueError(
                f"shard-index must be < shard-total, got {self.shard_index} of {self.shard_total} "
                "(shards count from 0)"
            )
        if self.server_url and not self.server_url.startswith(("http://", "https://")):
            raise ValueError(
                f"server-url must start with http:// or https://, got {self.server_url!r}"
            )
        if self.server_url and self.auth == "token" and not self.token:
            raise ValueError(
                "auth is token but token is empty: pass `token: ${{ secrets.CPCI_TOKEN }}`, "
                "or use `auth: oidc` with `permissions: id-token: write`"
            )
        if self.mode == "report" and not self.server_url:
            raise ValueError("mode report needs server-url (the PR report comes from the service)")
        if self.mode == "report" and not self.github_token:
            raise ValueError(
                "mode report needs github-token to comment and create the check run: leave it "
                "at its default `${{ github.token }}` with `permissions: pull-requests: write, "
                "checks: write`"
            )
        return self

    def upload_settings(self) -> UploadSettings:
        """The uploader's settings from these inputs: every one is given, so no `CPCI_*` variable
        of the job's environment can stand in for an input left empty."""
        return UploadSettings(
            server=self.server_url or None,
            token=SecretStr(self.token),
            auth=self.auth,
            oidc_audience=self.oidc_audience or None,
        )

    @property
    def rerun_cap(self) -> int:
        """`--cpci-reruns`: the `reruns` input, else the rerun policy's default. Adaptive's is
        only worth its height with evidence to stop by: without a server-url every failure would
        pay it, so there it is fixed's."""
        if self.reruns is not None:
            return self.reruns
        decides = self.reruns_policy == "adaptive" and bool(self.server_url)
        return DEFAULT_CAPS["adaptive" if decides else "fixed"]

    @property
    def extra_pytest_args(self) -> list[str]:
        return shlex.split(self.pytest_args)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ActionSettings:
        """Read every `CPCI_INPUT_*` variable; empty ones keep their default, as in action.yml."""
        env = os.environ if environ is None else environ
        values = {
            name: env[PREFIX + name.upper()]
            for name in cls.model_fields
            if env.get(PREFIX + name.upper(), "") != ""
        }
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = []
            for error in exc.errors():
                where = "-".join(str(part) for part in error["loc"]).replace("_", "-")
                problems.append(f"{where}: {error['msg']}" if where else error["msg"])
            raise ActionSettingsError("bad cpci action input: " + "; ".join(problems)) from None

    @staticmethod
    def input_name(field: str) -> str:
        """The input's name in action.yml (`batch_size` -> `batch-size`)."""
        return field.replace("_", "-")
