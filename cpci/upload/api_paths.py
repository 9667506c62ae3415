"""The paths of the service's API that the uploader and the Action call, in one place.

Kept free of any server import so the service (or a later shared URL map) can import it instead
of spelling the paths again. Each segment taken from a caller is quoted, so a repository name can
never add a segment of its own.
"""

from __future__ import annotations

from urllib.parse import quote

API = "/api/v1"
#: POST a `cpci.run/1` envelope; answers a receipt (stored or duplicate).
UPLOADS = f"{API}/uploads"


def repo(repository: str) -> str:
    """`/api/v1/repos/OWNER/NAME` for `OWNER/NAME`, each half quoted."""
    owner, _, name = repository.partition("/")
    return f"{API}/repos/{quote(owner, safe='')}/{quote(name, safe='')}"


def commits(repository: str) -> str:
    """POST first-parent links (commit, parent) of the repository's history."""
    return f"{repo(repository)}/commits"


def pull_report(repository: str, number: int) -> str:
    """GET the pull request's report (404 until something was uploaded for it)."""
    return f"{repo(repository)}/pulls/{int(number)}/report"
