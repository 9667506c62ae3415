"""What a maintainer acts on for one config (the config page's `triage`): where it broke on the
default trusted branch (`views.culprit`), its open quarantine with the straight passes its
release still needs (`views.quarantine`), and the polluters its order-dependent results named
(`crud.order_dependence`)."""

from __future__ import annotations

from collections import Counter

from sqlmodel import Session

from cpci.server.core.policies import PullReportPolicy, QuarantinePolicy
from cpci.server.crud.order_dependence import order_dependence_seen
from cpci.server.crud.quarantine import open_quarantines
from cpci.server.crud.repos import get_config
from cpci.server.models import Repository
from cpci.server.views.culprit import branch_culprits
from cpci.server.views.quarantine import quarantine_entry
from cpci.server.views.read_models import ConfigTriage, PolluterPair
from cpci.urls import Links


def config_triage(
    *,
    session: Session,
    repo: Repository,
    key: str,
    report_policy: PullReportPolicy,
    policy: QuarantinePolicy,
    links: Links,
) -> ConfigTriage:
    """`key`'s culprit range, quarantine and order dependences on the default trusted branch."""
    assert repo.id is not None
    config_pk = get_config(session=session, repo=repo, key=key).id
    assert config_pk is not None
    branch = report_policy.trusted.default_branch(repo.default_branch)
    found = branch_culprits(
        session=session,
        repo=repo,
        keys={config_pk: key},
        branch=branch,
        policy=report_policy,
        links=links,
    )[key]
    held = open_quarantines(session=session, repo_id=repo.id).get(key)
    seen = order_dependence_seen(session=session, config_pk=config_pk)
    counts = Counter(tuple(d.polluters) for d in seen.found)
    return ConfigTriage(
        branch=branch,
        culprit=None if found.status == "no-results" else found,
        quarantine=(
            quarantine_entry(
                session=session, repo=repo, held=held, branch=branch, policy=policy, links=links
            )
            if held is not None
            else None
        ),
        release_rate=policy.release_rate,
        level=policy.level,
        order_dependence=[
            PolluterPair(polluters=list(polluters), count=n, text=_after(polluters))
            for polluters, n in counts.most_common()
        ],
        order_dependence_runs=seen.ci_run_ids,
    )


def _after(polluters: tuple[str, ...]) -> str:
    if len(polluters) == 1:
        return f"fails after {polluters[0]}"
    shown = ", ".join(polluters[:5])
    more = f" and {len(polluters) - 5} more" if len(polluters) > 5 else ""
    return f"fails after {shown}{more} together (no single one explains it)"
