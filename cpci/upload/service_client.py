"""The one client of the cpci service's API, shared by `cpci upload` and the Action.

It knows the paths (`cpci.urls`), the bearer header, the retry policy and how an answer becomes
an error: httpx's exceptions and the service's refusals are mapped here, once, to `UploadFailed`
(status 0 when there was no answer), whose message names the URL, the status and the service's
`detail`. Answers are read into their wire types (`cpci.schema`) here too, so a caller holds an
`UploadReceipt` or a `PullRequestReport`, never the service's JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from cpci import urls
from cpci.schema import (
    Ancestry,
    AncestryReceipt,
    ConfigDurations,
    EvidenceSummary,
    ParentLink,
    PullRequestReport,
    QuarantineEntry,
    QuarantineList,
    QuarantineRequest,
    RunEnvelope,
    UploadReceipt,
)
from cpci.schema.culprit import CulpritRange
from cpci.upload.errors import UploadFailed
from cpci.upload.retry import ONCE, Backoff

#: What the "no answer" message tells the user to check, in both spellings.
SERVER_HINT = "check the server URL (--server / CPCI_SERVER, or the Action's server-url)"

Answer = TypeVar("Answer", bound=BaseModel)


class ServiceClient:
    """Requests to one cpci service with one credential (None: anonymous reads)."""

    def __init__(
        self,
        server: str,
        token: str | None,
        *,
        retry: Backoff = ONCE,
        transport: httpx.BaseTransport | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.retry = retry
        self.transport = transport
        self.timeout_s = timeout_s

    def upload(self, envelope: RunEnvelope) -> UploadReceipt:
        """POST the envelope; returns the service's receipt (stored or duplicate)."""
        body = envelope.model_dump_json(by_alias=True)
        headers = {"Content-Type": "application/json"}
        response = self._request("POST", urls.API_UPLOADS, content=body, headers=headers)
        return _read(UploadReceipt, response)

    def record_commits(
        self, repository: str, links: Sequence[tuple[str, str]], *, branch: str | None
    ) -> int:
        """Record first-parent links (commit, parent) of `branch`'s history; returns how many
        the service took (sending a link again is fine, a contradicting one is a 409; an
        untrusted branch's, a 403)."""
        body = Ancestry(parents=[ParentLink(commit=c, parent=p) for c, p in links], branch=branch)
        headers = {"Content-Type": "application/json"}
        path = urls.api_commits(repository)
        response = self._request("POST", path, content=body.model_dump_json(), headers=headers)
        return _read(AncestryReceipt, response).recorded

    def pull_report(self, repository: str, number: int) -> PullRequestReport | None:
        """The PR report; None while nothing was uploaded for the PR."""
        try:
            response = self._request("GET", urls.api_pull_report(repository, number))
        except UploadFailed as exc:
            if exc.status == 404:
                return None
            raise
        return _read(PullRequestReport, response)

    def durations(
        self, repository: str, branch: str | None = None, runs: int | None = None
    ) -> ConfigDurations:
        """Median seconds per config over the branch's recent trusted runs: what every shard
        of a CI run balances by (the Action fetches it once per job, before planning)."""
        response = self._request("GET", urls.api_durations(repository, branch, runs))
        return _read(ConfigDurations, response)

    def evidence(self, repository: str, branch: str | None = None) -> EvidenceSummary:
        """Each config's base-branch evidence (`cpci.evidence/1`): what the runner decides its
        reruns and new configs' runs by (the Action fetches it once per job, with the durations)."""
        response = self._request("GET", urls.api_evidence(repository, branch))
        return _read(EvidenceSummary, response)

    def quarantines(self, repository: str, *, released: bool = False) -> QuarantineList:
        """The quarantined configs (with `released`, the ended ones too), each with who, why,
        since when and the straight passes its release still needs."""
        path = urls.api_quarantines(repository) + ("?released=true" if released else "")
        return _read(QuarantineList, self._request("GET", path))

    def quarantine(self, repository: str, config: str, reason: str) -> QuarantineEntry:
        """Quarantine `config` (needs a branch-scoped credential; a 409 when it is already)."""
        return self._quarantine_write(urls.api_quarantines(repository), config, reason)

    def release_quarantine(self, repository: str, config: str, note: str) -> QuarantineEntry:
        """End `config`'s quarantine by hand (a 404 when it is not quarantined)."""
        return self._quarantine_write(urls.api_quarantine_release(repository), config, note)

    def culprit(self, repository: str, config: str, branch: str | None = None) -> CulpritRange:
        """Where `config` broke on a trusted branch (`cpci.culprit/1`): what a bisection runs."""
        path = urls.api_culprit(repository, config, branch)
        return _read(CulpritRange, self._request("GET", path))

    def _quarantine_write(self, path: str, config: str, reason: str) -> QuarantineEntry:
        body = QuarantineRequest(config=config, reason=reason).model_dump_json()
        headers = {"Content-Type": "application/json"}
        return _read(QuarantineEntry, self._request("POST", path, content=body, headers=headers))

    def _request(
        self,
        method: str,
        path: str,
        *,
        content: str | None = None,
        json: Any = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        url = self.server + path
        sent = dict(headers or {})
        if self.token:
            sent["Authorization"] = f"Bearer {self.token}"

        def once() -> httpx.Response:
            try:
                with httpx.Client(transport=self.transport, timeout=self.timeout_s) as http:
                    response = http.request(method, url, content=content, json=json, headers=sent)
            except httpx.HTTPError as exc:
                raise UploadFailed(f"no answer from {url} ({exc}): {SERVER_HINT}") from exc
            if response.status_code not in (200, 201):
                raise UploadFailed(
                    f"{url} answered {response.status_code}: {_detail(response)}",
                    response.status_code,
                )
            return response

        return self.retry.call(once)


def _read(model: type[Answer], response: httpx.Response) -> Answer:
    """The answer as its wire type; a body that is not one is the service's fault, said as such
    (a proxy's HTML page, or a service of another version)."""
    try:
        return model.model_validate_json(response.content)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()[:3]
        )
        raise UploadFailed(
            f"{response.request.url} answered {response.status_code} with a body that is not a "
            f"valid {model.__name__} ({problems}): check that the server URL is a cpci service "
            "of a compatible version",
            response.status_code,
        ) from exc


def _detail(response: httpx.Response) -> str:
    """The service's `detail`, else the start of the body."""
    try:
        detail = response.json().get("detail", response.text)
    except (ValueError, AttributeError):
        detail = response.text[:500]
    return str(detail)
