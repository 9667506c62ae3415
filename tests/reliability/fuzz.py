"""Fuzzing the service through its own OpenAPI schema with schemathesis.

(schemathesis's own pytest integration does not run under pytest 9, so each operation's
strategy is driven with hypothesis directly; a failing case is recorded with its request, and
the run goes on, so one run shows every kind of failure.)

Every operation gets generated requests (valid and invalid), half of them aimed at a seeded
repository so the reads hit real rows and uploads really store, all with a valid upload token.
Each response must not be a 5xx, and must match the schema for its status (body and content
type). Shared by `tests/reliability/test_fuzz.py` (few examples) and
`benchmarks/reliability_fuzz.py` (many).
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from pydantic import SecretStr
from schemathesis import GenerationMode, checks
from schemathesis.core.failures import FailureGroup

from cpci.server import Settings, create_app
from cpci.server.core.db import create_db_engine
from tests.builders import REPO, send
from tests.reliability.service import make_envelope
from tests.server.databases import migrate_with_token

WEBHOOK_SECRET = "fuzz-secret"
CHECKS = [
    checks.not_a_server_error,
    checks.response_schema_conformance,
    checks.content_type_conformance,
]


def fuzz_app(directory: Path) -> tuple[FastAPI, str]:
    """An app over a migrated SQLite database holding a few runs of REPO, and REPO's token."""
    url = f"sqlite:///{directory / 'fuzz.db'}"
    engine = create_db_engine(url)
    token = migrate_with_token(engine, name="fuzz")
    engine.dispose()
    app = create_app(Settings(database_url=url, github_webhook_secret=SecretStr(WEBHOOK_SECRET)))
    with TestClient(app) as client:
        for run, pr in (("1", None), ("2", 7)):
            body = make_envelope(run, 0, 1, 5, pull_request=pr).model_dump(mode="json")
            response = send(client, body, headers={"Authorization": f"Bearer {token}"})
            assert response.status_code == 201, response.text
    return app, token


class Aim:
    """Points every other case at the seeded repository (path and upload body)."""

    def __init__(self) -> None:
        self._turn = itertools.count()
        self.cases: Counter[str] = Counter()

    def __call__(self, case: Any) -> None:
        self.cases[f"{case.method} {case.operation.path}"] += 1
        if next(self._turn) % 2:
            return
        owner, repo = REPO.split("/")
        if case.path_parameters and "owner" in case.path_parameters:
            case.path_parameters.update(owner=owner, repo=repo)
        if isinstance(case.body, dict) and "repository" in case.body:
            case.body["repository"] = REPO


def schema_of(app: FastAPI) -> Any:
    return schemathesis.openapi.from_asgi("/openapi.json", app)


@dataclass
class FuzzReport:
    cases: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    failures: dict[str, str] = field(default_factory=dict)  # kind -> first example

    @property
    def total(self) -> int:
        return sum(self.cases.values())


def fuzz(app: FastAPI, token: str, *, max_examples: int, seed: int = 0) -> FuzzReport:
    """Run `max_examples` positive and as many negative cases per operation."""
    report = FuzzReport()
    aim = Aim()
    headers = {"Authorization": f"Bearer {token}"}
    for result in schema_of(app).get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=max_examples,
                deadline=None,
                database=None,
                derandomize=seed == 0,
                suppress_health_check=list(HealthCheck),
                print_blob=False,
            )
            def one(case: Any) -> None:
                aim(case)
                label = f"{case.method} {case.operation.path}"
                report.cases[label] += 1
                try:
                    response = case.call(headers=headers)
                    report.statuses[response.status_code] += 1
                    case.validate_response(response, checks=CHECKS)
                except (Exception, FailureGroup) as exc:
                    first = str(exc).split("\n - ")[-1].strip().splitlines()
                    kind = f"{label}: {type(exc).__name__}: {first[0][:200] if first else ''}"
                    report.failures.setdefault(kind, _describe(case, exc))

            try:
                one()
            except Unsatisfiable:
                pass  # nothing to make invalid: an operation without parameters or body
    return report


def _describe(case: Any, exc: BaseException) -> str:
    return (
        f"{case.method} {case.formatted_path} query={case.query!r} "
        f"body={str(case.body)[:300]!r}\n{str(exc)[:1500]}"
    )
