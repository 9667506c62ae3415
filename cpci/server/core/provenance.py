"""Which runs a credential may claim: the rules, as pure functions over typed records.

A run's results shape other runs' verdicts (a base-branch run is every PR's baseline), so a
credential may only claim what it was issued for:

- an upload token of scope `branch` may upload branch history and PR runs; of scope `pr`, PR
  runs only (a token handed to PR jobs cannot rewrite the base branch's history);
- a GitHub Actions OIDC token speaks for the event and ref it was minted in: a branch run (no
  PR) needs event `push`, `schedule` or `workflow_dispatch` and `ref == refs/heads/<branch>`; a
  PR run needs event `pull_request` and `ref == refs/pull/<N>/merge`, or an allow-listed
  `job_workflow_ref` (the fork-results workflow, which uploads for fork PRs from the base
  repository), and is then marked as a fork run;
- and it speaks for one workflow run at one commit: the upload's `ci_run_id` and `ci_attempt`
  must be its `run_id` and `run_attempt`, and its `sha` the upload's commit (for a PR run, the
  `merge_commit`: on `pull_request` events GitHub's `sha` is the merge commit of
  `refs/pull/<N>/merge`, which the workflow checks out), so a job cannot write results under
  another run's id or for a commit it did not test. The fork-results workflow is exempt: it
  uploads another run's results (the fork PR's, named by its `workflow_run` event).

Before any of that, an operator may allow-list the repositories whose OIDC tokens are accepted
at all (`check_allowed`): any repository on GitHub can mint a token for any audience.

Every refusal is a 403 naming the rule and what to do. The routes call these functions; nothing
here touches the database or the network, so each rule is unit-tested on its own.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from cpci.schema import RunEnvelope
from cpci.server.core.errors import Forbidden

#: Events whose OIDC tokens may claim branch history.
BRANCH_EVENTS = frozenset({"push", "schedule", "workflow_dispatch"})
#: The event whose OIDC tokens may claim the run of the pull request they were minted for.
PULL_REQUEST_EVENT = "pull_request"

#: What an upload token may claim. Tokens made before scopes existed were migrated to `branch`,
#: the rights they had; `cpci token create` defaults to `pr`, the safer one.
TokenScope = Literal["branch", "pr"]
TOKEN_SCOPES: tuple[TokenScope, ...] = ("branch", "pr")


@dataclass(frozen=True)
class OidcClaims:
    """The verified claims of a GitHub Actions OIDC token that provenance looks at."""

    repository: str
    repository_id: str | None
    subject: str
    event: str | None
    ref: str | None
    job_workflow_ref: str | None
    sha: str | None = None
    run_id: str | None = None
    run_attempt: str | None = None

    @classmethod
    def from_verified(cls, claims: Mapping[str, Any]) -> OidcClaims:
        """Pick the claims out of a token `OidcVerifier.verify` has checked."""

        def text(name: str) -> str | None:
            value = claims.get(name)
            return None if value is None else str(value)

        return cls(
            repository=str(claims["repository"]),
            repository_id=text("repository_id"),
            subject=text("sub") or "",
            event=text("event_name"),
            ref=text("ref"),
            job_workflow_ref=text("job_workflow_ref") or text("workflow_ref"),
            sha=text("sha"),
            run_id=text("run_id"),
            run_attempt=text("run_attempt"),
        )


@dataclass(frozen=True)
class Credential:
    """Who is calling, as proven by their bearer token."""

    repository: str
    via: Literal["token", "oidc"]
    subject: str  # "token:ID" or the OIDC subject
    scope: TokenScope | None = None  # upload tokens only
    claims: OidcClaims | None = None  # OIDC only

    def require(self, repository: str) -> None:
        """Forbidden unless the credential is for `repository`."""
        if self.repository != repository:
            raise Forbidden(
                f"this {'upload token' if self.via == 'token' else 'OIDC token'} is for "
                f"{self.repository}, not {repository}"
            )


@dataclass(frozen=True)
class Provenance:
    """What is recorded on a run about who uploaded it (and shown on its page)."""

    via: Literal["token", "oidc"]
    uploaded_by: str
    event: str | None = None
    ref: str | None = None
    workflow: str | None = None
    fork: bool = False
    repository_github_id: str | None = None


@dataclass(frozen=True)
class OidcAllowList:
    """The repositories whose OIDC tokens are accepted: by name (`OWNER/REPO`, or `OWNER/*`
    for all of an owner's) or by GitHub's numeric id (which survives a rename). Empty: all,
    which the settings allow only with CPCI_OIDC_ALLOW_ANY_REPOSITORY=true."""

    names: tuple[str, ...] = ()
    ids: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.names or self.ids)

    def admits(self, claims: OidcClaims) -> bool:
        """True when `claims` come from an allow-listed repository (or nothing is listed)."""
        if not self:
            return True
        claimed_id = claims.repository_id or ""
        if claimed_id.isdigit() and int(claimed_id) in self.ids:
            return True
        owner, _, _ = claims.repository.partition("/")
        wanted = {claims.repository.casefold(), f"{owner}/*".casefold()}
        return any(name.casefold() in wanted for name in self.names)


def check_allowed(claims: OidcClaims, allowed: OidcAllowList) -> None:
    """Forbidden unless the token's repository is allow-listed: checked before anything is
    looked up or written, so a stranger's token creates no repository."""
    if allowed.admits(claims):
        return
    raise Forbidden(
        f"OIDC tokens of {claims.repository} (repository id {claims.repository_id or 'unknown'}) "
        "are not accepted by this service: it takes OIDC tokens only from the repositories in "
        "CPCI_OIDC_ALLOWED_REPOSITORIES (OWNER/REPO or OWNER/*) or "
        "CPCI_OIDC_ALLOWED_REPOSITORY_IDS; ask its administrator to add this repository, or "
        "upload with a token from `cpci token create OWNER/REPO`"
    )


def check_upload(
    credential: Credential, envelope: RunEnvelope, *, fork_workflows: Collection[str]
) -> Provenance:
    """The provenance of an upload of `envelope` (its branch or pull request, its run and
    commit); Forbidden if the credential may not claim them."""
    branch, pull_request = envelope.branch, envelope.pull_request
    if credential.claims is None:
        _check_token_scope(credential, branch=branch, pull_request=pull_request)
        return Provenance(via="token", uploaded_by=credential.subject)
    claims = credential.claims
    fork = False
    if pull_request is None:
        _check_branch_claims(claims, branch)
    else:
        fork = _check_pull_request_claims(claims, pull_request, fork_workflows)
    if not fork:
        _check_run_claims(claims, envelope)
    return Provenance(
        via="oidc",
        uploaded_by=claims.subject,
        event=claims.event,
        ref=claims.ref,
        workflow=claims.job_workflow_ref,
        fork=fork,
        repository_github_id=claims.repository_id,
    )


def check_ancestry(credential: Credential, branch: str | None) -> str:
    """The branch whose history the credential may record (`branch`, the one the request
    names, if any); Forbidden without branch rights. Links steer every PR's base fallback, so
    the caller then checks that this branch is trusted."""
    hint = "record it from branch runs, which `cpci upload` does by itself"
    claimed = require_branch_rights(credential, "recording commit ancestry", hint)
    if claimed is None:
        if branch is None:
            raise Forbidden(
                "recording commit ancestry with an upload token needs the branch it is the "
                'history of (`"branch"` in the body): ancestry is taken from trusted branches '
                "only; upgrade cpci, whose `cpci upload` sends it"
            )
        return branch
    if branch is not None and branch != claimed:
        raise Forbidden(
            f"this OIDC token was minted on refs/heads/{claimed}, so it may record the history "
            f"of branch {claimed} only, not {branch!r}"
        )
    return claimed


def require_branch_rights(credential: Credential, doing: str, hint: str) -> str | None:
    """Forbidden unless the credential holds branch rights, what writes the history every PR
    is judged by: an upload token of scope `branch`, or an OIDC token from a branch run. The
    branch an OIDC token was minted on, None for a token (which names none). `doing` and
    `hint` say what was refused and how to do it instead."""
    if credential.claims is None:
        if credential.scope != "branch":
            raise Forbidden(
                f"{doing} needs an upload token of scope `branch` (this one is "
                f"`{credential.scope}`): {hint}"
            )
        return None
    claims = credential.claims
    ref = claims.ref or ""
    if claims.event not in BRANCH_EVENTS or not ref.startswith("refs/heads/"):
        raise Forbidden(
            f"{doing} needs an OIDC token from a branch run (event push, schedule or "
            f"workflow_dispatch on refs/heads/...), not event {claims.event!r} on ref "
            f"{claims.ref!r}: {hint}"
        )
    return ref.removeprefix("refs/heads/")


def run_scope(pull_request: int | None) -> TokenScope:
    """The scope a credential needs to write a run: `pr` for a pull request's run, else
    `branch`. A CI run id belongs to the scope that wrote it (`crud.ingest`)."""
    return "branch" if pull_request is None else "pr"


def check_repository_id(*, name: str, bound: int | None, claimed: str | None) -> int | None:
    """The GitHub id to bind `name` to (None: nothing to bind); Forbidden on a mismatch.

    The first OIDC upload binds the name to GitHub's numeric id; a token for the same name with
    another id comes from a repository that was deleted and recreated, or renamed onto it, and
    may neither write nor (where reads need a token) read the bound repository's history.
    """
    if claimed is None or not claimed.isdigit():
        return None
    if bound is None:
        return int(claimed)
    if bound != int(claimed):
        raise Forbidden(
            f"{name} is bound to GitHub repository id {bound}, but this OIDC token comes from "
            f"repository id {claimed} (the repository was deleted and recreated, or another one "
            f"renamed to {name}): its uploads and reads are refused; if the new repository is "
            f"the rightful owner of the history, an administrator must clear the binding "
            f"(`UPDATE repository SET github_id = NULL WHERE name = '{name}'`)"
        )
    return None


def _check_token_scope(
    credential: Credential, *, branch: str | None, pull_request: int | None
) -> None:
    if pull_request is None and credential.scope != "branch":
        raise Forbidden(
            f"this upload token ({credential.subject}) has scope `pr`: it may upload pull "
            f"request runs only, not branch history ({branch or 'no branch'}, no pull_request); "
            f"upload branch runs with a token made by `cpci token create {credential.repository} "
            "--scope branch`, or with a GitHub OIDC token from a push workflow"
        )


def _check_branch_claims(claims: OidcClaims, branch: str | None) -> None:
    if claims.event not in BRANCH_EVENTS:
        raise Forbidden(
            f"a branch run (no pull_request) must be uploaded from a push, schedule or "
            f"workflow_dispatch workflow; this OIDC token is from event {claims.event!r}: "
            "upload PR runs with their pull_request number"
        )
    if branch is None or claims.ref != f"refs/heads/{branch}":
        raise Forbidden(
            f"this OIDC token was minted on ref {claims.ref!r}, so it may claim only that "
            f"branch, not branch {branch!r}: upload with --branch matching the workflow's ref"
        )


def _check_run_claims(claims: OidcClaims, envelope: RunEnvelope) -> None:
    """The token's own workflow run and commit, against the run and commit the upload names."""
    pull = envelope.pull_request
    if pull is None:
        if claims.sha != envelope.commit:
            raise Forbidden(
                f"this OIDC token was minted for commit {_claimed(claims.sha, 'sha')} (its `sha` "
                f"claim: the commit the workflow ran on), but the upload claims commit "
                f"{envelope.commit}: upload the workflow's own commit (GITHUB_SHA, which "
                "`cpci upload` takes unless --commit says otherwise)"
            )
    elif claims.sha != envelope.merge_commit:
        raise Forbidden(
            f"this OIDC token was minted for commit {_claimed(claims.sha, 'sha')} (its `sha` "
            f"claim: on pull_request events the merge commit of refs/pull/{pull}/merge, which "
            f"GitHub made and the workflow checks out), but the upload's merge_commit is "
            f"{envelope.merge_commit or 'not given'}: send that commit as merge_commit and the "
            "PR's head as commit, as `cpci upload` does in pull_request workflows (from "
            "GITHUB_SHA and the event; --merge-commit)"
        )
    if claims.run_id != envelope.ci_run_id:
        raise Forbidden(
            f"this OIDC token comes from CI run {_claimed(claims.run_id, 'run_id')} (its "
            f"`run_id` claim), but the upload claims ci_run_id {envelope.ci_run_id!r}: a job may "
            "upload only its own workflow run (GITHUB_RUN_ID, which `cpci upload` takes unless "
            "--ci-run-id says otherwise)"
        )
    if claims.run_attempt != str(envelope.ci_attempt):
        raise Forbidden(
            f"this OIDC token comes from attempt {_claimed(claims.run_attempt, 'run_attempt')} "
            f"of CI run {claims.run_id} (its `run_attempt` claim), but the upload claims "
            f"ci_attempt {envelope.ci_attempt}: upload under the job's own attempt "
            "(GITHUB_RUN_ATTEMPT, which `cpci upload` takes unless --ci-attempt says otherwise)"
        )


def _claimed(value: str | None, name: str) -> str:
    return value if value is not None else f"nothing (the token has no `{name}` claim)"


def _check_pull_request_claims(
    claims: OidcClaims, pull_request: int, fork_workflows: Collection[str]
) -> bool:
    """True when the upload comes from the allow-listed fork-results workflow."""
    if claims.job_workflow_ref is not None and claims.job_workflow_ref in fork_workflows:
        return True
    expected = f"refs/pull/{pull_request}/merge"
    if claims.event != PULL_REQUEST_EVENT or claims.ref != expected:
        raise Forbidden(
            f"a run of PR #{pull_request} must be uploaded from that PR's pull_request workflow "
            f"(ref {expected}) or from an allow-listed fork-results workflow "
            f"(CPCI_OIDC_FORK_WORKFLOWS); this OIDC token is from event {claims.event!r} on "
            f"ref {claims.ref!r} (workflow {claims.job_workflow_ref!r})"
        )
    return False
