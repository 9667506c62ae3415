"""Links the API hands out: to CI runs on GitHub and to the service's own pages."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

API_PREFIX = "/api/v1"


@dataclass(frozen=True)
class Links:
    github_url: str = "https://github.com"

    def run(self, repository: str, ci_run_id: str, attempt: int) -> str:
        base = self.github_url.rstrip("/")
        return f"{base}/{repository}/actions/runs/{ci_run_id}/attempts/{attempt}"

    def api_run(self, repository: str, ci_run_id: str) -> str:
        return f"{API_PREFIX}/repos/{repository}/runs/{quote(ci_run_id, safe='')}"

    def history(self, repository: str, config: str) -> str:
        """The config's page in the web UI: what a person following a link wants to see."""
        from cpci.server.ui import urls  # ui.urls imports this module

        return urls.config(repository, config)
