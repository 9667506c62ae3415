"""The `cpci.run/1` envelope for an upload, from flags and the CI's environment.

Precedence: a flag beats an environment variable. In GitHub Actions the defaults come from
GITHUB_REPOSITORY, GITHUB_SHA, GITHUB_RUN_ID, GITHUB_RUN_ATTEMPT, GITHUB_REF_NAME, RUNNER_NAME,
and on `pull_request` events from the event payload (GITHUB_EVENT_PATH). There GITHUB_SHA is the
merge commit GitHub made of the PR's head into its base, which `actions/checkout` checks out and
which a pull_request OIDC token's `sha` claim names: it is sent as `merge_commit`, while `commit`
is the PR's head (what the PR's report, comment and check run are about) and `base_commit`,
`base_branch` (GITHUB_BASE_REF) its base, read from the payload.

The matrix leg (`--leg` / CPCI_LEG) tells apart jobs of one CI run that run the same shard in
different environments (the reusable workflow's runner-label sets, e.g. H100 and A100). It is a
name, or a JSON list of runner labels, stored sorted and comma-joined (`a100,gpu,self-hosted`),
so the same label set always names the same leg. `--legs` / CPCI_LEGS declares every leg of the
matrix (a JSON list of names or of label lists, e.g. the reusable workflow's `runner-labels`), so
a leg whose jobs never upload counts as missing and the report waits for it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from cpci.schema import ResultRecord, RunEnvelope, ShardPlan
from cpci.shard_spec import parse_shard
from cpci.upload.environment import detect
from cpci.upload.errors import EnvelopeError


@dataclass(frozen=True)
class RunFields:
    """What the flags said; None means "take it from the environment"."""

    repository: str | None = None
    commit: str | None = None
    branch: str | None = None
    pull_request: int | None = None
    base_commit: str | None = None
    base_branch: str | None = None
    merge_commit: str | None = None
    ci_run_id: str | None = None
    ci_attempt: int | None = None
    shard: str | None = None  # "i/N", 0-based index
    runner_name: str | None = None
    leg: str | None = None  # a name, or a JSON list of runner labels
    legs: str | None = None  # JSON list of the matrix's legs (names or label lists)
    started_at: datetime | None = None  # when the shard ran (its plan was made)
    ended_at: datetime | None = None  # ... and wrote its last result


#: The fields no upload goes without: (field, flag, the CI's variable).
REQUIRED = (
    ("repository", "--repository", "GITHUB_REPOSITORY"),
    ("commit", "--commit", "GITHUB_SHA"),
    ("ci_run_id", "--ci-run-id", "GITHUB_RUN_ID"),
)


def resolve(fields: RunFields, env: Mapping[str, str]) -> RunFields:
    """The flags over the CI's variables (and, on `pull_request` events, its payload): the run
    as far as either says, None where neither does. Resolving twice changes nothing."""
    event = pull_request_event(env)
    head = event.get("head", {}) if event else {}
    base = event.get("base", {}) if event else {}
    commit = fields.commit or head.get("sha") or env.get("GITHUB_SHA") or None
    # GITHUB_SHA of a pull_request event is GitHub's merge commit, not the head read above.
    merged = env.get("GITHUB_SHA") if event and env.get("GITHUB_SHA") != commit else None
    return replace(
        fields,
        repository=fields.repository or env.get("GITHUB_REPOSITORY") or None,
        commit=commit,
        branch=fields.branch or head.get("ref") or env.get("GITHUB_REF_NAME") or None,
        pull_request=fields.pull_request or (event.get("number") if event else None),
        base_commit=fields.base_commit or base.get("sha"),
        base_branch=fields.base_branch or env.get("GITHUB_BASE_REF") or base.get("ref") or None,
        merge_commit=fields.merge_commit or merged,
        ci_run_id=fields.ci_run_id or env.get("GITHUB_RUN_ID") or None,
        ci_attempt=fields.ci_attempt or _int(env.get("GITHUB_RUN_ATTEMPT"), "GITHUB_RUN_ATTEMPT"),
        shard=fields.shard or env.get("CPCI_SHARD") or None,
        runner_name=fields.runner_name or env.get("RUNNER_NAME") or None,
        leg=fields.leg if fields.leg is not None else env.get("CPCI_LEG", ""),
        legs=fields.legs if fields.legs is not None else env.get("CPCI_LEGS", ""),
    )


def missing(fields: RunFields, why: Mapping[str, str] | None = None) -> list[str]:
    """The required fields `fields` lacks, each as its flag and variable (and `why[field]`, the
    reason no default could be found, where given)."""
    why = why or {}
    return [
        f"{flag} (or {variable}{'; ' + why[name] if name in why else ''})"
        for name, flag, variable in REQUIRED
        if not getattr(fields, name)
    ]


def build_envelope(
    fields: RunFields,
    results: Sequence[ResultRecord],
    env: Mapping[str, str],
    plan: ShardPlan | None = None,
) -> RunEnvelope:
    """The envelope; `plan` (the runner's plan file) gives the plan hash, and the shard when
    neither the flag nor CPCI_SHARD does (a shard that contradicts it is refused). Every
    required field that neither the flags nor the environment give is named at once."""
    given = resolve(fields, env)
    absent = missing(given)
    if absent:
        raise EnvelopeError(f"missing {', '.join(absent)}")
    if given.pull_request is None and (given.base_branch or given.merge_commit):
        raise EnvelopeError(
            "--base-branch and --merge-commit describe a pull request's run: give "
            "--pull-request too (or upload from a pull_request event)"
        )
    index, total = _shard_of(given.shard, plan)
    values: dict[str, Any] = {
        "repository": given.repository,
        "commit": given.commit,
        "branch": given.branch,
        "pull_request": given.pull_request,
        "base_commit": given.base_commit,
        "base_branch": given.base_branch,
        "merge_commit": given.merge_commit,
        "ci_run_id": given.ci_run_id,
        "ci_attempt": given.ci_attempt or 1,
        "shard_index": index,
        "shard_total": total,
        "leg": leg_name(given.leg or ""),
        "legs": declared_legs(given.legs or ""),
        "plan_hash": plan.plan_hash if plan is not None else None,
        "runner_name": given.runner_name,
        "environment": detect(results),
        "started_at": given.started_at,
        "ended_at": given.ended_at,
        "results": list(results),
    }
    try:
        return RunEnvelope.model_validate(values)
    except ValueError as exc:
        raise EnvelopeError(f"the upload is not a valid cpci.run/1 envelope: {exc}") from exc


def leg_name(value: str) -> str:
    """A leg's stored name: a JSON list of runner labels becomes its sorted labels, joined."""
    text = value.strip()
    if not text.startswith("["):
        return text
    try:
        labels = json.loads(text)
    except ValueError as exc:
        raise EnvelopeError(
            f"--leg (or CPCI_LEG) looks like a JSON list of runner labels but is not: {exc}"
        ) from exc
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise EnvelopeError(f"--leg (or CPCI_LEG) must be a name or a JSON list of labels: {text}")
    return ",".join(sorted(set(labels)))


def declared_legs(value: str) -> list[str]:
    """The matrix's legs from a JSON list whose items are names or lists of runner labels."""
    if not value.strip():
        return []
    try:
        items = json.loads(value)
    except ValueError as exc:
        raise EnvelopeError(f"--legs (or CPCI_LEGS) must be a JSON list: {exc}") from exc
    if not isinstance(items, list):
        raise EnvelopeError(f"--legs (or CPCI_LEGS) must be a JSON list, got {value!r}")
    return sorted({leg_name(item if isinstance(item, str) else json.dumps(item)) for item in items})


def _int(value: str | None, name: str) -> int | None:
    if not value:
        return None
    if not value.isdigit():
        raise EnvelopeError(f"{name} must be a whole number, got {value!r}")
    return int(value)


def _shard(value: str | None) -> tuple[int, int]:
    if not value:
        return 0, 1
    try:
        return parse_shard(value)
    except ValueError as exc:
        raise EnvelopeError(f"--shard (or CPCI_SHARD) {exc}, got {value!r}") from None


def _shard_of(value: str | None, plan: ShardPlan | None) -> tuple[int, int]:
    if plan is None:
        return _shard(value)
    planned = (plan.shard_index, plan.shard_total)
    if not value:
        return planned
    given = _shard(value)
    if given != planned:
        raise EnvelopeError(
            f"--shard (or CPCI_SHARD) says {given[0]}/{given[1]} but the runner planned shard "
            f"{planned[0]}/{planned[1]} (its .plan.json): pass the runner's --cpci-shard value"
        )
    return given


def pull_request_event(env: Mapping[str, str]) -> dict[str, Any] | None:
    """The `pull_request` object of the triggering event, None outside pull_request events."""
    if not env.get("GITHUB_EVENT_NAME", "").startswith("pull_request"):
        return None
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            payload = json.load(fh)
    except (OSError, ValueError) as exc:
        raise EnvelopeError(
            f"cannot read the event payload GITHUB_EVENT_PATH={path}: {exc}"
        ) from exc
    pull: dict[str, Any] | None = payload.get("pull_request")
    return pull
