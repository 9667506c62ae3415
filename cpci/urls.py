"""Every URL cpci hands out or calls, in one map: UI pages, their JSON twins, the API the
uploader and the Action call, and the CI run pages on GitHub.

The service routes and links with it, the GitHub bot and the Action link the PR page with it,
the uploader calls the API with it, so a path is spelled once. It imports nothing (the standard
library only): a client that only links or uploads never loads the service. The UI's shapes are a
contract (the PR comment links here): change them only with redirects. Every part taken from a
caller is one quoted path segment, so a repository or run id can never add a segment of its own;
config ids hold `/`, `::` and `[...]`, so they travel as a query parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, urlencode

API_PREFIX = "/api/v1"
UI_PREFIX = "/ui"
#: POST a `cpci.run/1` envelope; answers a receipt (stored or duplicate).
API_UPLOADS = f"{API_PREFIX}/uploads"


def segment(value: str) -> str | None:
    """`value` as one URL path segment, or None where no quoting can keep it one: empty, or
    only dots (`.`, `..`; WHATWG URLs resolve `%2e%2e` as `..` too)."""
    if not value.strip("."):
        return None
    return quote(value, safe="")


def _repo(repository: str) -> str:
    owner, _, name = repository.partition("/")
    return f"{quote(owner, safe='')}/{quote(name, safe='')}"


# The web UI's pages.


def static(path: str) -> str:
    return f"{UI_PREFIX}/static/{path}" if path else f"{UI_PREFIX}/static"


def index() -> str:
    return f"{UI_PREFIX}/"


def dashboard(repository: str, branch: str | None = None) -> str:
    query = f"?{urlencode({'branch': branch})}" if branch else ""
    return f"{UI_PREFIX}/{_repo(repository)}{query}"


def grid(repository: str, branch: str | None = None) -> str:
    """Every config across the recent commits of a branch, one row each (filters as a query)."""
    query = f"?{urlencode({'branch': branch})}" if branch else ""
    return f"{UI_PREFIX}/{_repo(repository)}/grid{query}"


def config(repository: str, key: str) -> str:
    """The config's page: its history, what a person following a link wants to see."""
    return f"{UI_PREFIX}/{_repo(repository)}/config?{urlencode({'config': key})}"


def run(repository: str, ci_run_id: str) -> str:
    return f"{UI_PREFIX}/{_repo(repository)}/runs/{quote(ci_run_id, safe='')}"


def pull(repository: str, number: int) -> str:
    return f"{UI_PREFIX}/{_repo(repository)}/pulls/{int(number)}"


def pull_section(repository: str, number: int, section: str, offset: int = 0) -> str:
    """One page of a PR report's section (the items past the PR page's cap)."""
    name = quote(section, safe="")
    return f"{pull(repository, number)}/sections/{name}?{urlencode({'offset': int(offset)})}"


# Each page's JSON twin in the API (what the page shows, as data).


def api_dashboard(repository: str) -> str:
    return f"{api_repo(repository)}/dashboard"


def api_grid(repository: str, branch: str | None = None) -> str:
    """The grid's twin: its columns (commits) and its rows (configs), filtered and paged."""
    query = f"?{urlencode({'branch': branch})}" if branch else ""
    return f"{api_repo(repository)}/grid{query}"


def api_config(repository: str, key: str) -> str:
    return f"{api_repo(repository)}/config?{urlencode({'config': key})}"


def api_run_detail(repository: str, ci_run_id: str) -> str:
    """The run page's twin: shards, worlds, timings and every result."""
    return f"{api_repo(repository)}/runs/{quote(ci_run_id, safe='')}/detail"


def api_pull_page(repository: str, number: int) -> str:
    """The PR page's twin: the report and its file-consistency findings."""
    return f"{api_repo(repository)}/pulls/{int(number)}/page"


# The API's resources.


def api_repo(repository: str) -> str:
    """`/api/v1/repos/OWNER/NAME` for `OWNER/NAME`, each half quoted."""
    return f"{API_PREFIX}/repos/{_repo(repository)}"


def api_run_summary(repository: str, ci_run_id: str) -> str:
    """A CI run's summary: shards reported, outcomes, failing configs."""
    return f"{api_repo(repository)}/runs/{quote(ci_run_id, safe='')}"


def api_durations(repository: str, branch: str | None = None, runs: int | None = None) -> str:
    """GET median seconds per config over recent trusted branch runs (what shards balance by)."""
    query = {k: v for k, v in (("branch", branch), ("runs", runs)) if v is not None}
    return f"{api_repo(repository)}/durations" + (f"?{urlencode(query)}" if query else "")


def api_evidence(repository: str, branch: str | None = None) -> str:
    """GET each config's base-branch evidence (`cpci.evidence/1`): what the runner's rerun
    decisions weigh a failure against."""
    query = urlencode({"branch": branch}) if branch is not None else ""
    return f"{api_repo(repository)}/evidence" + (f"?{query}" if query else "")


def api_culprit(repository: str, key: str, branch: str | None = None) -> str:
    """GET where a config broke on a trusted branch (`cpci.culprit/1`): what `cpci culprit`
    bisects."""
    query = {"config": key, **({"branch": branch} if branch is not None else {})}
    return f"{api_repo(repository)}/culprit?{urlencode(query)}"


def api_quarantines(repository: str) -> str:
    """GET the quarantined configs; POST one to quarantine it (`cpci quarantine add`)."""
    return f"{api_repo(repository)}/quarantines"


def api_quarantine_release(repository: str) -> str:
    """POST a config to end its quarantine (`cpci quarantine remove`)."""
    return f"{api_quarantines(repository)}/release"


def api_flaky(repository: str) -> str:
    """GET the configs labelled flaky, each with its evidence (the dashboard shows the top)."""
    return f"{api_repo(repository)}/flaky"


def api_commits(repository: str) -> str:
    """POST first-parent links (commit, parent) of the repository's history."""
    return f"{api_repo(repository)}/commits"


def api_pull_report(repository: str, number: int) -> str:
    """GET the pull request's report (404 until something was uploaded for it)."""
    return f"{api_repo(repository)}/pulls/{int(number)}/report"


def api_pull_report_section(repository: str, number: int, section: str, offset: int = 0) -> str:
    """GET one page of a section of the pull request's report (`next_offset` pages on)."""
    name = quote(section, safe="")
    query = urlencode({"offset": int(offset)})
    return f"{api_pull_report(repository, number)}/{name}?{query}"


@dataclass(frozen=True)
class Links:
    """The links that depend on the service's settings: CI runs live on its GitHub instance,
    runs GitHub did not run on this service (`service_url`: its public URL, if known)."""

    github_url: str = "https://github.com"
    service_url: str | None = None

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

    def ci_run(self, repository: str, ci_run_id: str, attempt: int) -> str | None:
        """The run's page on GitHub if GitHub ran it, else None. GitHub's run ids are numbers
        (an OIDC upload's is its token's `run_id`); a run uploaded from elsewhere has its own
        (`cpci upload` gives a local upload `local-...`, the demo `demo-...`), and a link built
        from it would lead to a page that does not exist."""
        if not (ci_run_id.isascii() and ci_run_id.isdigit()):
            return None
        return self.run(repository, ci_run_id, attempt)

    def run_page(self, repository: str, ci_run_id: str, attempt: int) -> str:
        """Where a link to a run leads: its page on GitHub where GitHub ran it, else its page
        on this service (absolute where the service knows its own URL)."""
        github = self.ci_run(repository, ci_run_id, attempt)
        if github is not None:
            return github
        return (self.service_url or "").rstrip("/") + run(repository, ci_run_id)

    def history(self, repository: str, key: str) -> str:
        """Where a config's history link leads: its page in the web UI."""
        return config(repository, key)
