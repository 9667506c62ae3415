"""Play a verdict corpus through a real `cpci serve` over HTTP, keeping what a user sees.

`play` sends each step of the corpus in order (ancestry, uploads, the flaky list after the
recall window, each PR's report right after its last shard, as the bot reads it), each with the
token its CI job would hold, and keeps only what a reader takes away: each report's status and
each config's verdict, and the flaky list. Every refusal or server error stops the play with the
service's own words (and the end of its log): a corpus that silently dropped uploads would
measure nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlmodel import Session

from cpci.server.core.db import create_db_engine
from cpci.server.core.provenance import TOKEN_SCOPES
from cpci.server.crud.tokens import create_token
from tests.reliability.service import served
from tests.server.verdict_corpus import (
    REPO,
    Corpus,
    ReadFlakyList,
    ReadReport,
    RecordAncestry,
    Step,
    Upload,
)


class CorpusPlayError(RuntimeError):
    """The service refused or failed a step: the corpus (or the service) must be fixed."""


@dataclass(frozen=True)
class ReportView:
    """What a reader takes from one PR report: its status and each listed config's verdict."""

    status: str
    verdicts: Mapping[str, str]  # config id -> verdict; passed and skipped configs are not listed

    def verdict(self, config: str) -> str:
        return self.verdicts.get(config, "passed")


@dataclass(frozen=True)
class Observed:
    """What the service said: each PR's report when it was read, and the flaky list after the
    recall window; with the traffic it took."""

    reports: Mapping[int, ReportView]
    flaky_at_window: frozenset[str]
    requests: int
    bytes_sent: int


@dataclass(frozen=True)
class ServiceAccess:
    """Where the service is, and the two upload tokens CI holds: trusted branch jobs get a
    `branch` token (branch history and commit ancestry), PR jobs a `pr` token."""

    url: str
    branch_token: str
    pr_token: str

    def token_for(self, step: Step) -> str:
        if isinstance(step, Upload) and step.envelope.pull_request is not None:
            return self.pr_token
        return self.branch_token


@contextmanager
def corpus_service(database_url: str, log: Path) -> Iterator[ServiceAccess]:
    """`cpci serve` on an empty database (it migrates at start), with a `branch` and a `pr`
    upload token written to its database as `cpci token create` writes them (the CLI itself is
    tested end to end elsewhere; two CLI processes would double this fixture's time). A failed
    step is raised with the end of the service's log, where its traceback is."""
    with served(database_url, log) as service:
        engine = create_db_engine(database_url)
        try:
            with Session(engine) as session:
                made = {
                    scope: create_token(
                        session=session, repository=REPO, name=f"corpus-{scope}", scope=scope
                    ).token
                    for scope in TOKEN_SCOPES
                }
                session.commit()
        finally:
            engine.dispose()
        try:
            yield ServiceAccess(service.url, branch_token=made["branch"], pr_token=made["pr"])
        except CorpusPlayError as exc:
            tail = log.read_text(errors="replace")[-4000:]
            raise CorpusPlayError(f"{exc}\n--- the end of the cpci serve log ---\n{tail}") from exc


def play(corpus: Corpus, access: ServiceAccess) -> Observed:
    """Send every step in order, one request at a time (bounded loopback traffic), each with the
    token its CI job would hold."""
    reports: dict[int, ReportView] = {}
    flaky: frozenset[str] = frozenset()
    requests = sent = 0
    api = f"/api/v1/repos/{REPO}"
    with httpx.Client(base_url=access.url, timeout=120) as http:

        def call(step: Step, method: str, path: str, body: Any = None) -> Any:
            nonlocal requests, sent
            content = None if body is None else json.dumps(body).encode()
            headers = {
                "Authorization": f"Bearer {access.token_for(step)}",
                "Content-Type": "application/json",
            }
            response = http.request(method, path, content=content, headers=headers)
            requests += 1
            sent += len(content or b"")
            if response.status_code not in (200, 201):
                raise CorpusPlayError(
                    f"{method} {path} answered {response.status_code}: {response.text[:2000]}"
                )
            return response.json()

        for step in corpus.steps:
            if isinstance(step, Upload):
                body = step.envelope.model_dump(mode="json", by_alias=True, exclude_none=True)
                call(step, "POST", "/api/v1/uploads", body)
            elif isinstance(step, RecordAncestry):
                links = [{"commit": c, "parent": p} for c, p in step.links]
                call(step, "POST", f"{api}/commits", {"parents": links, "branch": "main"})
            elif isinstance(step, ReadFlakyList):
                listed = call(step, "GET", f"{api}/flaky")
                flaky = frozenset(item["config"] for item in listed["configs"])
            elif isinstance(step, ReadReport):
                report = call(step, "GET", f"{api}/pulls/{step.number}/report")
                reports[step.number] = _view(report)
    return Observed(reports, flaky, requests, sent)


def _view(report: dict[str, Any]) -> ReportView:
    """Every listed config's verdict, from whatever sections the report has (new sections
    added by the service are read too)."""
    verdicts: dict[str, str] = {}
    for section in report.values():
        if isinstance(section, list):
            for item in section:
                if isinstance(item, dict) and "verdict" in item and "config" in item:
                    verdicts[item["config"]] = item["verdict"]
    return ReportView(report["status"], verdicts)
