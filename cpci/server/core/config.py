"""The service's settings: one typed object, read from `CPCI_*` environment variables.

Tests and `cpci serve` build a `Settings` and pass it to `create_app`; nothing below reads the
environment on its own, so two apps with different settings can live in one process.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from cpci.github import CommentMode, FailOn

GITHUB_OIDC_ISSUER = "https://token.actions.githubusercontent.com"
#: An allow-list entry: OWNER/REPO, or OWNER/* for every repository of OWNER.
ALLOWED_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]+/(\*|[A-Za-z0-9_.-]+)")


class Settings(BaseSettings):
    """Everything the service can be told. Env var names are the field names upper-cased with the
    `CPCI_` prefix, e.g. `CPCI_DATABASE_URL`."""

    model_config = SettingsConfigDict(env_prefix="CPCI_", extra="ignore", frozen=True)

    database_url: str = Field(
        default="sqlite:///cpci.db",
        description="sqlite:///PATH (the default, WAL mode) or postgresql://USER@HOST/DB",
    )
    database_read_url: str | None = Field(
        default=None,
        description="where GET and HEAD requests read (pages, history, reports, dashboard): "
        "a read-only PostgreSQL replica or role; uploads, webhooks and their worker use "
        "CPCI_DATABASE_URL; default: CPCI_DATABASE_URL",
    )
    host: str = Field(default="127.0.0.1", description="address `cpci serve` listens on")
    port: int = Field(default=8000, ge=0, le=65535, description="port `cpci serve` listens on")
    migrate_on_start: bool = Field(
        default=True, description="apply Alembic migrations when `cpci serve` starts"
    )
    read_access: Literal["public", "token"] = Field(
        default="public",
        description="public: anyone may read results; token: reads need a token of the repository",
    )
    max_upload_bytes: int = Field(
        default=32 * 1024 * 1024,
        ge=1024,
        description="larger uploads are refused with 413 while they are read, before they are "
        "parsed (webhook deliveries too, within GitHub's 25 MB)",
    )
    max_body_bytes: int = Field(
        default=2 * 1024 * 1024,
        ge=1024,
        description="the same for the bodies of every other route (commit ancestry's 10,000 "
        "links are about 1 MB), which are also refused (422) if their JSON nests deeper than "
        "200 levels",
    )
    max_results_per_upload: int = Field(
        default=100_000,
        ge=1,
        description="an upload (one shard) with more results is refused with 413: shard the suite",
    )
    max_uploads_per_hour: int = Field(
        default=10_000,
        ge=0,
        description="stored shards per repository in any hour (counted in the database, so "
        "replicas agree); more are refused with 429 and Retry-After; 0 = no limit",
    )

    oidc_audience: str | None = Field(
        default=None,
        description="the audience GitHub Actions OIDC tokens must be minted for; default: "
        "CPCI_PUBLIC_URL without a trailing slash, which `cpci upload` and the Action request "
        "by default (the server URL they upload to)",
    )
    oidc_issuer: str = Field(default=GITHUB_OIDC_ISSUER, description="the OIDC tokens' issuer")
    oidc_jwks_url: str = Field(
        default=f"{GITHUB_OIDC_ISSUER}/.well-known/jwks",
        description="keys the tokens are signed with",
    )
    oidc_jwks_cache_s: float = Field(default=300.0, ge=0, description="how long keys are cached")
    oidc_fork_workflows: tuple[str, ...] = Field(
        default=(),
        description="JSON list of job_workflow_ref values (OWNER/REPO/.github/workflows/F.yml@REF) "
        "allowed to upload PR runs for fork PRs; their runs are marked fork",
    )
    oidc_allowed_repositories: tuple[str, ...] = Field(
        default=(),
        description="JSON list of OWNER/REPO or OWNER/* whose OIDC tokens are accepted (setting "
        "it turns OIDC on); any other repository's token is a 403 (and no repository is "
        "created for it); OIDC needs this, the ids below or CPCI_OIDC_ALLOW_ANY_REPOSITORY, "
        "else the service refuses to start",
    )
    oidc_allowed_repository_ids: tuple[int, ...] = Field(
        default=(),
        description="JSON list of GitHub repository ids (the tokens' repository_id claim) "
        "accepted like the names above, whatever the repository is called now",
    )
    oidc_allow_any_repository: bool = Field(
        default=False,
        description="accept the OIDC tokens of every repository on GitHub (any of them can mint "
        "one for the audience): only where no stranger can reach the service",
    )

    github_url: str = Field(default="https://github.com", description="for links to CI runs")

    public_url: str | None = Field(
        default=None,
        description="this service's own URL, for links in PR comments and as the default OIDC "
        "audience",
    )
    github_webhook_secret: SecretStr | None = Field(
        default=None,
        description="the GitHub webhook secret; /github/webhook answers 503 without; an empty "
        "one refuses to start",
    )
    github_api_url: str = Field(
        default="https://api.github.com", description="GitHub Enterprise: https://HOST/api/v3"
    )
    github_token: SecretStr | None = Field(
        default=None, description="a token to comment and create check runs with (or an App)"
    )
    github_app_id: str | None = Field(default=None, description="a GitHub App to act as")
    github_app_private_key: SecretStr | None = Field(
        default=None, description="the GitHub App's PEM private key (installation from webhooks)"
    )
    github_bot_login: str | None = Field(
        default=None, description="the bot's login, e.g. my-app[bot]; its comments only are edited"
    )
    github_comment_mode: CommentMode = Field(
        default="edit", description="edit one comment in place, a new one on regression, or none"
    )
    github_fail_on: FailOn = Field(
        default="new-failures", description="what turns the check run red"
    )
    github_rules_path: str = Field(
        default=".github/cpci.yml", description="file-consistency rules, read at the PR's base"
    )
    webhook_max_attempts: int = Field(
        default=8,
        ge=1,
        description="attempts at a webhook delivery that fails transiently (GitHub down, rate "
        "limited) before it is left failed for GitHub's manual redelivery",
    )
    webhook_backoff_s: float = Field(
        default=30.0,
        gt=0,
        description="wait after a delivery's first failed attempt; doubled after each one",
    )
    webhook_max_backoff_s: float = Field(
        default=3600.0, gt=0, description="the longest wait between two attempts at a delivery"
    )

    flaky_min_runs: int = Field(
        default=10,
        ge=1,
        description="no flaky label below this many branch runs without same-commit evidence",
    )
    flaky_window: int = Field(default=50, ge=2, description="results per config looked at")
    flaky_half_life: float = Field(
        default=20.0, gt=0, description="half-life, in results, of the flip rate that ranks them"
    )
    flake_chance_threshold: float = Field(
        default=0.2,
        gt=0,
        lt=1,
        description="a known-flaky config failing at head is a NEW FAILURE when a flake would "
        "fail like that (rate bound ^ failed attempts, x the new-signature share) less often",
    )
    flake_credible_level: float = Field(
        default=0.95,
        gt=0.5,
        lt=1,
        description="credible level of the upper bound on a flaky config's failure rate "
        "(Jeffreys posterior) that the chance above is computed with",
    )
    quarantine_release_rate: float = Field(
        default=0.05,
        gt=0,
        lt=1,
        description="a quarantined config is released once the trusted branch's results since "
        "its quarantine bound its failure rate below this, at CPCI_FLAKE_CREDIBLE_LEVEL "
        "(from nothing, 38 straight passes at the defaults); never on a calendar",
    )
    trusted_branches: tuple[str, ...] = Field(
        default=(),
        description="JSON list of branch globs (`*` within one /-part, `**` across) whose runs "
        'judge PRs, e.g. \'["main", "release/*"]\': a PR is compared only with runs of its base '
        "branch, when that branch is trusted; other branches' runs are stored and shown and "
        "count for nobody else; empty = the repository's default branch (as GitHub reports "
        "it; `main` until it has)",
    )
    baseline_runs: int = Field(default=5, ge=1, description="base-branch runs for timings")
    ancestor_depth: int = Field(default=50, ge=0, description="ancestors searched for a baseline")
    storm_share: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="a shard (per matrix leg) is an infra storm when one failure signature "
        "covers this share of its configs; with an infra rule its configs are INFRA",
    )
    storm_min_configs: int = Field(
        default=20, ge=1, description="the fewest configs failing one way that make a storm"
    )
    report_section_cap: int = Field(
        default=200,
        ge=1,
        description="items per section of a PR report and its page; the rest are paged "
        "through .../report/{section}",
    )
    warm_pull_reports: bool = Field(
        default=True,
        description="read a PR's report read model into the cache when an upload to its newest "
        "head is stored, before answering, so the first report read after it is warm",
    )
    warm_on_start_s: float = Field(
        default=20.0,
        ge=0,
        description="seconds the service may spend at start-up, before it serves, reading the "
        "report read models of recently active PRs into the cache, so the first report read "
        "after a restart is warm; no new PR is started past it; 0 = off",
    )
    warm_on_start_pulls: int = Field(
        default=4,
        ge=0,
        description="the most PRs read at start-up, the most recently active first (fewer "
        "when the cache holds fewer)",
    )
    warm_on_start_days: float = Field(
        default=7.0,
        gt=0,
        description="only PRs with a run uploaded in the last this many days are read at start-up",
    )
    raw_retention_days: float | None = Field(
        default=None,
        gt=0,
        description="raw results of runs older than this many days are rolled up into daily "
        "aggregates per config, environment and branch, then deleted (`cpci db compact`, and the "
        "service every CPCI_COMPACT_INTERVAL_S); history, flakiness, durations and the evidence "
        "read both; unset: every raw result is kept",
    )
    compact_interval_s: float = Field(
        default=3600.0,
        gt=0,
        description="how often the service compacts results older than CPCI_RAW_RETENTION_DAYS "
        "(only where that is set)",
    )

    @field_validator("database_url", "database_read_url")
    @classmethod
    def _known_engine(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and not value.startswith(
            ("sqlite://", "postgresql://", "postgresql+psycopg://")
        ):
            raise ValueError(
                f"CPCI_{(info.field_name or '').upper()} must start with sqlite:// or "
                f"postgresql://, got {value!r}"
            )
        return value

    @field_validator("oidc_allowed_repositories")
    @classmethod
    def _repository_patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [entry for entry in value if not ALLOWED_REPOSITORY.fullmatch(entry)]
        if bad:
            raise ValueError(
                f"CPCI_OIDC_ALLOWED_REPOSITORIES entries must be OWNER/REPO or OWNER/*, got "
                f'{bad[0]!r}: write e.g. \'["acme/attn", "acme-labs/*"]\''
            )
        return value

    @field_validator("trusted_branches")
    @classmethod
    def _branch_patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [entry for entry in value if not entry.strip() or entry != entry.strip()]
        if bad:
            raise ValueError(
                f"CPCI_TRUSTED_BRANCHES entries must be branch names or globs without spaces "
                f'around them, got {bad[0]!r}: write e.g. \'["main", "release/*"]\''
            )
        return value

    @model_validator(mode="after")
    def _oidc_needs_an_audience_and_an_allow_list(self) -> Settings:
        if not self.oidc_enabled:
            return self
        listed = bool(self.oidc_allowed_repositories or self.oidc_allowed_repository_ids)
        if not listed and not self.oidc_allow_any_repository:
            raise ValueError(
                f"OIDC is on (CPCI_OIDC_AUDIENCE={self.oidc_audience!r}) but no repository is "
                "named, and any repository on GitHub can mint a token for an audience: set "
                "CPCI_OIDC_ALLOWED_REPOSITORIES (OWNER/REPO or OWNER/*) and/or "
                "CPCI_OIDC_ALLOWED_REPOSITORY_IDS, or CPCI_OIDC_ALLOW_ANY_REPOSITORY=true to "
                "accept every repository's tokens"
            )
        if listed and self.oidc_allow_any_repository:
            raise ValueError(
                "CPCI_OIDC_ALLOW_ANY_REPOSITORY=true contradicts CPCI_OIDC_ALLOWED_REPOSITORIES / "
                "CPCI_OIDC_ALLOWED_REPOSITORY_IDS: unset one of them"
            )
        if self.oidc_token_audience is None:
            raise ValueError(
                "OIDC is on (an allow-list is set) but has no audience: set CPCI_PUBLIC_URL, "
                "this service's URL, which is the audience by default (what `cpci upload` and "
                "the Action request), or CPCI_OIDC_AUDIENCE"
            )
        return self

    @model_validator(mode="after")
    def _webhook_secret_not_empty(self) -> Settings:
        if self.github_webhook_secret is not None and not (
            self.github_webhook_secret.get_secret_value()
        ):
            raise ValueError(
                "CPCI_GITHUB_WEBHOOK_SECRET is set but empty, which would check deliveries with "
                "an empty HMAC key: set it to the webhook's secret on GitHub, or unset it to "
                "turn webhooks off"
            )
        return self

    @property
    def oidc_enabled(self) -> bool:
        """OIDC tokens are accepted once the service is told whose (an allow-list, or
        CPCI_OIDC_ALLOW_ANY_REPOSITORY) or for which audience."""
        return bool(
            self.oidc_audience
            or self.oidc_allowed_repositories
            or self.oidc_allowed_repository_ids
            or self.oidc_allow_any_repository
        )

    @property
    def oidc_token_audience(self) -> str | None:
        """The audience OIDC tokens must carry: CPCI_OIDC_AUDIENCE, else this service's own URL
        (CPCI_PUBLIC_URL, without a trailing slash, as the uploader sends its server URL); None
        while OIDC is off or the service does not know its URL."""
        if not self.oidc_enabled:
            return None
        if self.oidc_audience:
            return self.oidc_audience
        return self.public_url.rstrip("/") if self.public_url else None

    def oidc_stance(self) -> str:
        """One line for the start-up log: whose OIDC tokens are accepted, for which audience."""
        if not self.oidc_enabled:
            return "OIDC uploads are off (no CPCI_OIDC_ALLOWED_REPOSITORIES or CPCI_OIDC_AUDIENCE)"
        if self.oidc_allow_any_repository:
            whose = "every repository on GitHub (CPCI_OIDC_ALLOW_ANY_REPOSITORY=true)"
        else:
            named = [*self.oidc_allowed_repositories, *map(str, self.oidc_allowed_repository_ids)]
            whose = f"{', '.join(named)} only (CPCI_OIDC_ALLOWED_REPOSITORIES / _IDS)"
        return f"OIDC tokens accepted for audience {self.oidc_token_audience!r} from {whose}"


def reference_markdown() -> str:
    """The settings as a Markdown table, as README.md shows them (a test keeps them in step)."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for name, field in Settings.model_fields.items():
        default = "(none)" if field.default is None else f"`{field.default}`"
        rows.append(f"| `CPCI_{name.upper()}` | {default} | {field.description or ''} |")
    return "\n".join(rows) + "\n"
