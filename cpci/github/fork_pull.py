"""Which pull request a fork's workflow run was for, told without guessing.

The fork-results workflow uploads a fork PR's results from a `workflow_run` job, and GitHub's
`workflow_run` event lists no pull requests for a fork's run. A commit can be the head of
several PRs (one branch opened against two bases, or two forks' branches at one commit), so
"the first PR whose head is this commit" may upload one PR's results as another's. Here a PR is
taken only when GitHub (`pulls/get`) says its head is the run's head repository, head branch
*and* head commit, all three from the event, and only when exactly one such PR is named:

- by the event's `pull_requests` (listed for runs of this repository's own branches), or
- by the shards themselves (`RESULTS.pull`, written by the Action from the `pull_request` event
  it ran in). The fork's code could write anything there, so a number is only a candidate: one
  whose head disagrees is refused, and a fork can only ever name a PR of its own branch.

Anything else (no candidate, none that matches, two that do) is refused with what to do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cpci.github.client import GitHubClient
from cpci.github.errors import NotFound
from cpci.github.models import PullRequest


class ForkPullError(ValueError):
    """No single pull request can be told from the run; the message says why and what to do."""


@dataclass(frozen=True)
class RunHead:
    """What a `workflow_run` event says the run ran on: trusted, it comes from GitHub."""

    repository: str  # the head repository, OWNER/NAME (the fork)
    branch: str
    sha: str
    listed: tuple[int, ...]  # the event's pull_requests (empty for a fork's run)

    @classmethod
    def from_event(cls, payload: Mapping[str, Any]) -> RunHead:
        """The head of the run a `workflow_run` delivery (GITHUB_EVENT_PATH) is about."""
        try:
            run = payload["workflow_run"]
            return cls(
                repository=str(run["head_repository"]["full_name"]),
                branch=str(run["head_branch"]),
                sha=str(run["head_sha"]),
                listed=tuple(int(pr["number"]) for pr in run.get("pull_requests") or ()),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ForkPullError(
                f"the event is not a workflow_run event with its head ({exc!r} missing): run "
                "this on `on: workflow_run`"
            ) from None


def resolve_fork_pull(
    client: GitHubClient, repo: str, head: RunHead, claimed: Iterable[int] = ()
) -> PullRequest:
    """The one PR of `repo` whose head is `head`, among the event's and the shards' numbers."""
    candidates = sorted({*head.listed, *claimed})
    where = f"{head.repository}:{head.branch} at {head.sha[:12]}"
    if not candidates:
        raise ForkPullError(
            f"cannot tell which pull request the run of {where} was for: GitHub lists none for "
            "a fork's run and no shard named one (their results come from a cpci older than "
            "the .pull files, or the run was not a pull_request run); upload by hand with "
            "`cpci upload --pull-request N` once you know it"
        )
    matching, refused = [], []
    for number in candidates:
        try:
            pull = client.get_pull(repo, number)
        except NotFound:
            refused.append(f"#{number} does not exist in {repo}")
            continue
        why = _mismatch(pull, head)
        if why:
            refused.append(f"#{number} {why}")
        else:
            matching.append(pull)
    if len(matching) == 1:
        return matching[0]
    if matching:
        numbers = ", ".join(f"#{p.number}" for p in matching)
        raise ForkPullError(
            f"the run of {where} is named for {numbers}, each with that head: the shards "
            "disagree on which one ran, so none is uploaded; rerun the PR's workflow"
        )
    raise ForkPullError(
        f"no pull request of {repo} has the head {where}: {'; '.join(refused)}; nothing is uploaded"
    )


def _mismatch(pull: PullRequest, head: RunHead) -> str:
    """Why `pull` is not the PR of `head` ('' when it is)."""
    if (pull.head_repo or "").casefold() != head.repository.casefold():
        return f"has its head in {pull.head_repo or 'a deleted repository'}"
    if pull.head_ref != head.branch:
        return f"has the head branch {pull.head_ref}"
    if pull.head_sha != head.sha:
        return (
            f"has moved on to {pull.head_sha[:12]} since this run: the run of its new head "
            "uploads for it"
        )
    return ""
