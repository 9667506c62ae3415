"""Links the API hands out: to CI runs on GitHub and to the service's own pages."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

API_PREFIX = "/api/v1"


@dataclass(frozen=True)
class Links:
    github_url: str = "https://github.com"

    def run(self, repository: str, ci_run_id: str, attempt: int) -> str:
        """The run's page on GitHub. Every part is one quoted path segment, so an uploaded
        `ci_run_id` such as `../../settings` can never lead out of `/actions/runs/`; a part that
        is only dots (which browsers resolve as `..`) links to the repository's Actions tab."""
        base = self.github_url.rstrip("/")
        owner, _, name = repository.partition("/")
        parts = [segment(owner), segment(name)]
        if None in parts:
            return f"{base}/"
        actions = f"{base}/{parts[0]}/{parts[1]}/actions"
        run = segment(ci_run_id)
        return f"{actions}/runs/{run}/attempts/{int(attempt)}" if run else actions

    def api_run(self, repository: str, ci_run_id: str) -> str:
        return f"{API_PREFIX}/repos/{repository}/runs/{quote(ci_run_id, safe='')}"

    def history(self, repository: str, config: str) -> str:
        """The config's page in the web UI: what a person following a link wants to see."""
        from cpci.server.ui import urls  # ui.urls imports this module

        return urls.config(repository, config)


def segment(value: str) -> str | None:
    """`value` as one URL path segment, or None where no quoting can keep it one: empty, or
    only dots (`.`, `..`; WHATWG URLs resolve `%2e%2e` as `..` too)."""
    if not value.strip("."):
        return None
    return quote(value, safe="")
