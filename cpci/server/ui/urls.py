"""The UI's stable URLs and their JSON twins in the API, built in one place.

The PR comment and other pages link here, so these shapes are a contract: change them only
with redirects. Config ids hold `/`, `::` and `[...]`, so they travel as a query parameter.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

from cpci.server.links import API_PREFIX

UI_PREFIX = "/ui"


def _repo(repository: str) -> str:
    owner, _, name = repository.partition("/")
    return f"{quote(owner, safe='')}/{quote(name, safe='')}"


def static(path: str) -> str:
    return f"{UI_PREFIX}/static/{path}" if path else f"{UI_PREFIX}/static"


def index() -> str:
    return f"{UI_PREFIX}/"


def dashboard(repository: str, branch: str | None = None) -> str:
    query = f"?{urlencode({'branch': branch})}" if branch else ""
    return f"{UI_PREFIX}/{_repo(repository)}{query}"


def config(repository: str, key: str) -> str:
    return f"{UI_PREFIX}/{_repo(repository)}/config?{urlencode({'config': key})}"


def run(repository: str, ci_run_id: str) -> str:
    return f"{UI_PREFIX}/{_repo(repository)}/runs/{quote(ci_run_id, safe='')}"


def pull(repository: str, number: int) -> str:
    return f"{UI_PREFIX}/{_repo(repository)}/pulls/{number}"


def api_dashboard(repository: str) -> str:
    return f"{API_PREFIX}/repos/{_repo(repository)}/dashboard"


def api_config(repository: str, key: str) -> str:
    return f"{API_PREFIX}/repos/{_repo(repository)}/config?{urlencode({'config': key})}"


def api_run(repository: str, ci_run_id: str) -> str:
    return f"{API_PREFIX}/repos/{_repo(repository)}/runs/{quote(ci_run_id, safe='')}/detail"


def api_pull(repository: str, number: int) -> str:
    return f"{API_PREFIX}/repos/{_repo(repository)}/pulls/{number}/page"
