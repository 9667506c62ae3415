"""How the uploader reaches the service: one typed object, from flags over `CPCI_*` variables.

Precedence: a flag beats its environment variable (`--server` over `CPCI_SERVER`), which beats the
default; an empty variable counts as unset. The spool defaults to `$RUNNER_TEMP/cpci-spool` in
GitHub Actions, else `~/.cache/cpci/spool` (see `spool.default_spool_dir`). This is the one place
the command line's upload settings are read from the environment; the run's own description
(repository, commit, shard, leg) comes from the CI's variables in `envelope.build_envelope`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from cpci.upload.credentials import AuthMethod, HeldToken, bearer
from cpci.upload.errors import UploadError
from cpci.upload.spool import default_spool_dir


class UploadSettingsError(UploadError, ValueError):
    """A setting has a bad value; the message names the flag and its variable."""

    exit_code = 2


class UploadSettings(BaseSettings):
    """The service, the credential and the spool of an upload. Env var names are the field names
    upper-cased with the `CPCI_` prefix, e.g. `CPCI_OIDC_AUDIENCE`."""

    model_config = SettingsConfigDict(
        env_prefix="CPCI_", env_ignore_empty=True, extra="ignore", frozen=True
    )

    server: str | None = Field(default=None, description="the service's URL")
    token: SecretStr | None = Field(default=None, description="a repository upload token")
    auth: AuthMethod = Field(
        default="token", description="token, or oidc: a GitHub Actions OIDC token"
    )
    oidc_audience: str | None = Field(
        default=None,
        description="the audience OIDC tokens are for; default: the server URL, which the "
        "service takes by default (its CPCI_PUBLIC_URL)",
    )
    spool: Path = Field(
        default_factory=lambda: default_spool_dir(os.environ),
        description="where uploads wait while the service is down",
    )

    @classmethod
    def from_flags(cls, **flags: Any) -> UploadSettings:
        """The settings with every flag that was given (not None) over the environment."""
        try:
            return cls(**{name: value for name, value in flags.items() if value is not None})
        except ValidationError as exc:
            problems = [
                f"--{'-'.join(str(p) for p in e['loc']).replace('_', '-')} (or "
                f"CPCI_{'_'.join(str(p) for p in e['loc']).upper()}): {e['msg']}, "
                f"got {e['input']!r}"
                for e in exc.errors()
            ]
            raise UploadSettingsError("; ".join(problems)) from None

    def require_server(self) -> str:
        """The service's URL; an upload without one cannot start."""
        if not self.server:
            raise UploadSettingsError("--server (or CPCI_SERVER) is required")
        return self.server

    def service_url(self, path: str) -> str:
        """`path` of the service (a receipt's run page, say) as an absolute URL."""
        return self.require_server().rstrip("/") + path

    def token_audience(self) -> str:
        """The audience OIDC tokens are requested for: the setting, else the server URL without
        a trailing slash, as the service normalises its own URL into its default audience."""
        return self.oidc_audience or self.require_server().rstrip("/")

    def token_source(
        self, environ: Mapping[str, str], *, transport: httpx.BaseTransport | None = None
    ) -> Callable[[], str]:
        """A fresh bearer token per call: OIDC tokens expire within minutes, so none is kept.
        `environ` holds GitHub's OIDC request variables; `transport` reaches their endpoint."""
        secret = self.token.get_secret_value() if self.token else None

        def token() -> str:
            return bearer(
                self.auth,
                token=secret,
                audience=self.token_audience() if self.auth == "oidc" else "",
                environ=environ,
                transport=transport,
            )

        return token

    def held_token(
        self, environ: Mapping[str, str], *, announce: Callable[[str], None] = print
    ) -> HeldToken:
        """The credential got once and reused until shortly before it expires (the Action's:
        it gets it before the tests run; see `HeldToken`)."""
        return HeldToken(self.token_source(environ), announce=announce)
