"""The commit that broke a config on a trusted branch, read along the first-parent chain.

A config red on main tells nobody which commit broke it, and with CI skipping commits (batched
pushes, cancelled runs) the first failing run is not the first bad commit. Walking the chain from
the tip: commits not run yet are passed over, then the failing stretch is read back to the
first commit the config passed on (`last_good`; a pass after a rerun counts: the code can pass
there). The oldest failing commit is `first_bad`, and the commits between that never ran it are
`untested`: the culprit is one of those or `first_bad`.

Only a break is named: the stretch's failing attempts are weighed with the chance test
(`cpci.evidence.flake_test`) against the config's record up to `last_good`, as a PR's failures
are weighed against the base branch; where a flake could still explain them the answer is
`undecided`, never a commit to blame.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from cpci.evidence import EvidencePolicy, flake_test
from cpci.schema.culprit import CulpritRange
from cpci.server.analysis.flakiness import flake_record
from cpci.server.analysis.observations import Observation


def find_culprit(
    *,
    repository: str,
    branch: str,
    config: str,
    chain: Sequence[str],
    history: Sequence[Observation],
    policy: EvidencePolicy,
) -> CulpritRange:
    """`config`'s break along `chain` (the trusted branch's first-parent commits, tip first),
    from its trusted `history` (branch runs; results at commits off the chain are not read)."""
    by_commit: dict[str, list[Observation]] = defaultdict(list)
    for o in history:
        if not o.on_pull_request and (o.counted or o.flaky):
            by_commit[o.run.commit].append(o)

    def answer(status: str, reason: str, **found: object) -> CulpritRange:
        return CulpritRange.model_validate(
            {
                "repository": repository,
                "branch": branch,
                "config": config,
                "status": status,
                "reason": reason,
                "tip": chain[0] if chain else None,
                "last_good": None,
                "first_bad": None,
                **found,
            }
        )

    stretch: list[Observation] = []
    first_bad: str | None = None
    untested: list[str] = []  # newest first while walking
    last_good: int | None = None
    for i, commit in enumerate(chain):
        seen = by_commit.get(commit, [])
        if not seen:
            if first_bad is not None:
                untested.append(commit)
            continue
        if any(o.passed or o.flaky for o in seen):
            last_good = i
            break
        stretch += seen
        first_bad, untested = commit, []
    if first_bad is None:
        if last_good is None:
            return answer("no-results", f"no result on the {len(chain)} commit(s) read")
        return answer("passing", f"passed on {chain[last_good][:12]}, its newest run on {branch}")
    commits = len({o.run.commit for o in stretch})
    if last_good is None:
        return answer(
            "undecided",
            f"failing on all {commits} commit(s) it ran on since {first_bad[:12]}: no pass on "
            f"the {len(chain)} commit(s) read to weigh the failures against",
            first_bad=first_bad,
        )
    before = [o for c in chain[last_good:] for o in by_commit.get(c, [])]
    failed = [o for o in stretch if o.failed]
    test = flake_test(
        flake_record(sorted(before, key=lambda o: o.run_id)),
        len(failed),
        [o.signature for o in failed if o.signature],
        policy,
    )
    found = {
        "first_bad": first_bad,
        "last_good": chain[last_good],
        "untested": untested[::-1],
        "chance": test,
    }
    if test.flake_explains:
        return answer(
            "undecided",
            f"failing on {commits} commit(s) since {first_bad[:12]}, but a flake could explain "
            f"it: {test.text()}",
            **found,
        )
    if untested:
        why = (
            f"broken between {chain[last_good][:12]} (last good) and {first_bad[:12]} (first "
            f"bad): {len(untested)} commit(s) between never ran it"
        )
    else:
        why = f"broken by {first_bad[:12]}: it passed on its parent {chain[last_good][:12]}"
    return answer("broken", f"{why}; {test.text()}", **found)
