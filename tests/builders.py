"""Typed builders of the wire types tests send and read, and the one way tests upload.

Each builder returns the `cpci.schema` type itself (validated as the service will validate it),
so a test states only what matters to it and cannot build what the runner or the uploader never
would: one config's `ResultRecord` (`record`), one shard's `RunEnvelope` (`envelope`), a PR's
`PullRequestReport` and its parts (`report`, `verdict`, `flaky_evidence`, `drift`). What a test
leaves out is a config that passed in 1 s on 2 ranks, in a shard of `REPO` at `BASE` on main,
run on an H100. `upload` sends an envelope to a service as the uploader does (its JSON, by
alias) through any `Client`: starlette's `TestClient` (an `httpx2.Client`) or an `httpx.Client`
bound to a live uvicorn; `send` is the same POST, its answer unread (for refusals).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias, TypeVar, overload

import httpx
import httpx2

from cpci import urls
from cpci.schema import (
    BaselineInfo,
    ConfigEvidence,
    ConfigVerdict,
    EvidenceSummary,
    FlakeRecord,
    FlakinessAssessment,
    Outcome,
    PullRequestReport,
    RankError,
    ReportCounts,
    ResultRecord,
    RunEnvelope,
    RunLink,
    ShardProgress,
    Shift,
    ShiftFinding,
    UploadReceipt,
    config_key,
)

#: What a test talks to a service through: starlette's `TestClient` is an `httpx2.Client`, a live
#: uvicorn is reached through an `httpx.Client`; both answer alike.
Client: TypeAlias = httpx.Client | httpx2.Client
Response: TypeAlias = httpx.Response | httpx2.Response

REPO = "acme/attn"
BASE = "a" * 40
HEAD = "b" * 40
#: What an envelope says it ran on, unless a test says otherwise.
ENVIRONMENT = {"torch": "2.4.0", "cuda": "12.4", "gpu": "H100", "backend": "nccl"}


def sha(n: int) -> str:
    """A distinct, valid commit sha per number."""
    return f"{n:040x}"


def nodeid(name: str) -> str:
    """The node id of the CP attention test's config `name`."""
    return f"tests/test_cp.py::test_attn[{name}]"


def config(name: str, world_size: int = 2) -> str:
    """The config key (`NODEID@WORLD_SIZE`) of the config `record(name)` builds."""
    return config_key(nodeid(name), world_size)


def record(
    name: str = "p2p",
    outcome: Outcome = "passed",
    *,
    message: str | None = None,
    rank: int = 0,
    **fields: Any,
) -> ResultRecord:
    """Config `name`'s result (`nodeid=` names any other test); a `message` is what `rank`
    reported in the test's call (the runner's `rank_errors`); `fields` set any other field."""
    values: dict[str, Any] = {
        "nodeid": nodeid(name),
        "world_size": 2,
        "outcome": outcome,
        "duration_s": 1.0,
    }
    if message is not None:
        values["rank_errors"] = [RankError(rank=rank, phase="call", message=message)]
    values.update(fields)
    return ResultRecord.model_validate(values)


def envelope(results: Sequence[ResultRecord] | None = None, **fields: Any) -> RunEnvelope:
    """One shard's upload of `results` (None: one passing config); `fields` set the rest."""
    values: dict[str, Any] = {
        "repository": REPO,
        "commit": BASE,
        "branch": "main",
        "ci_run_id": "100",
        "environment": ENVIRONMENT,
        "results": [record()] if results is None else list(results),
    }
    values.update(fields)
    return RunEnvelope.model_validate(values)


def as_json(envelope: RunEnvelope) -> dict[str, Any]:
    """`envelope` as the JSON the uploader sends (for a test that alters what it sends)."""
    return envelope.model_dump(mode="json", by_alias=True)


Built = TypeVar("Built", ResultRecord, RunEnvelope)


def replaced(built: Built, **fields: Any) -> Built:
    """A copy of `built` with `fields` replaced, validated again (unlike `model_copy`)."""
    return type(built).model_validate({**built.model_dump(by_alias=True), **fields})


@overload
def send(
    client: httpx2.Client,
    envelope: RunEnvelope | dict[str, Any],
    *,
    token: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> httpx2.Response: ...


@overload
def send(
    client: httpx.Client | str,
    envelope: RunEnvelope | dict[str, Any],
    *,
    token: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> httpx.Response: ...


def send(
    client: Client | str,
    envelope: RunEnvelope | dict[str, Any],
    *,
    token: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """POST `envelope` (or a body built by hand) to the service `client` talks to (or at that
    base URL); `token`: the bearer to send instead of the client's own."""
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    if isinstance(envelope, RunEnvelope):
        sent["Content-Type"] = "application/json"
        kwargs: dict[str, Any] = {"content": envelope.model_dump_json(by_alias=True)}
    else:
        kwargs = {"json": envelope}
    if isinstance(client, str):
        return httpx.post(client.rstrip("/") + urls.API_UPLOADS, headers=sent, **kwargs)
    return client.post(urls.API_UPLOADS, headers=sent, **kwargs)


def upload(
    client: Client | str,
    envelope: RunEnvelope | dict[str, Any],
    *,
    token: str | None = None,
    expect: int = 201,
) -> UploadReceipt:
    """Upload `envelope` and read the receipt: 201 stored, or `expect=200` for a duplicate."""
    response = send(client, envelope, token=token)
    assert response.status_code == expect, response.text
    return UploadReceipt.model_validate(response.json())


# A PR's report, as the service answers it (for the comment, the check run and the gate).


def verdict(name: str, kind: str = "new_failure", **fields: Any) -> ConfigVerdict:
    """Config `name`'s verdict (`kind`): by default a new failure of rank 1 at head."""
    key = config(name)
    values: dict[str, Any] = {
        "config": key,
        "config_pk": len(name),
        "history_url": f"/api/v1/repos/{REPO}/history?config={name}",
        "verdict": kind,
        "reason": "passes at base, fails at head",
        "head_outcome": "failed",
        "base_outcome": "passed",
        "message": "AssertionError: max abs error 0.31 > 0.01",
        "ranks": [1],
    }
    values.update(fields)
    return ConfigVerdict(**values)


def evidence_summary(
    records: Mapping[str, FlakeRecord], *, runs: int = 40, **fields: Any
) -> EvidenceSummary:
    """The base branch's evidence summary (`cpci.evidence/1`, at the service's defaults) holding
    `records`, config key -> its flake record there (as many runs as trials), with `fields`
    replaced."""
    values: dict[str, Any] = {
        "repository": REPO,
        "branch": "main",
        "runs": runs,
        "newest_commit": BASE,
        "threshold": 0.2,
        "level": 0.95,
        "configs": {
            key: ConfigEvidence(record=record, runs=record.trials)
            for key, record in records.items()
        },
    }
    values.update(fields)
    return EvidenceSummary(**values)


def flaky_evidence(**fields: Any) -> FlakinessAssessment:
    """A flaky config's assessment (8 failures in 20 runs), with `fields` replaced."""
    run = RunLink(
        ci_run_id="991",
        ci_attempt=1,
        commit="c" * 40,
        url="https://github.com/acme/attn/actions/runs/991/attempts/1",
    )
    values: dict[str, Any] = {
        "flaky": True,
        "reason": "flip rate 0.40 over 20 runs; its 95% lower bound 0.21 is at least "
        "the threshold 0.10",
        "runs": 20,
        "passes": 12,
        "failures": 8,
        "flips": 8,
        "flip_rate": 0.4,
        "lower_bound": 0.21,
        "effective_runs": 18.0,
        "same_commit": [],
        "failing_runs": [run],
    }
    values.update(fields)
    return FlakinessAssessment(**values)


def baseline(note: str = f"base {BASE[:12]}") -> BaselineInfo:
    """A PR's baseline found at its base commit, `BASE` itself."""
    return BaselineInfo(
        requested_commit=BASE, used_commit=BASE, commits_behind=0, run=None, note=note
    )


def report(
    *, configs: int = 412, results: int = 1236, pending: bool = False, **sections: Any
) -> PullRequestReport:
    """PR 42's report at `HEAD` against `BASE`, 8 shards (6 of them while `pending`), with
    `sections` (new_failures=[verdict(...)], ...)."""
    shards = ShardProgress(
        reported=6 if pending else 8, expected=8, missing=[6, 7] if pending else []
    )
    return PullRequestReport(
        repository=REPO,
        pull_request=42,
        head_commit=HEAD,
        status="pending" if pending else "complete",
        summary="summary text",
        head_runs=[],
        shards=shards,
        baseline=baseline(),
        counts=ReportCounts(configs=configs, results=results, by_verdict={}),
        **sections,
    )


def drift(name: str) -> ShiftFinding:
    """Config `name`'s max abs error doubled since the base."""
    shift = Shift(
        name="max_abs_err",
        value=0.02,
        baseline_median=0.01,
        baseline_mad=0.0,
        samples=1,
        change=0.01,
        relative=1.0,
        direction="up",
    )
    return ShiftFinding(
        config=config(name),
        config_pk=1,
        history_url=f"/api/v1/repos/{REPO}/history?config={name}",
        shift=shift,
    )
