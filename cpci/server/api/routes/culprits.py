"""The commit that broke a config on a trusted branch: what the bisection driver reads."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from cpci.schema.culprit import CulpritRange
from cpci.server.api.deps import LinksDep, PullReportPolicyDep, ReadableRepoDep, SessionDep
from cpci.server.views.culprit import config_culprit

router = APIRouter(prefix="/repos/{owner}/{repo}", tags=["results"])


@router.get(
    "/culprit",
    summary="Where a config broke on a trusted branch: last good, first bad, untested between",
    description="`cpci.culprit/1`: walking the branch's first-parent chain from its tip, the "
    "newest commit the config passed on, the oldest of the failing stretch after it and the "
    "commits between that never ran it; `broken` only where the chance test rejects a flake "
    "(else `undecided`). `midpoint` is what `cpci culprit` runs next. `branch` defaults to the "
    "default trusted branch; an untrusted branch is a 403.",
    responses={403: {"description": "the branch is not trusted (CPCI_TRUSTED_BRANCHES)"}},
)
def culprit(
    repository: ReadableRepoDep,
    session: SessionDep,
    policy: PullReportPolicyDep,
    links: LinksDep,
    config: Annotated[str, Query(min_length=1, description="config id: NODEID@WORLD_SIZE")],
    branch: Annotated[
        str | None, Query(min_length=1, max_length=255, pattern=r"^[^\x00]*$")
    ] = None,
) -> CulpritRange:
    return config_culprit(
        session=session, repo=repository, key=config, branch=branch, policy=policy, links=links
    )
