"""The shard plan the runner wrote beside its results file, for the upload to carry.

`--cpci-results PATH` makes the runner write `PATH.plan.json` (`cpci.schema.ShardPlan`): which
shard it ran and the hash of what it planned from. The upload sends the hash, and takes the shard
from the plan when neither `--shard` nor CPCI_SHARD says otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from cpci.schema import ShardPlan, plan_path, read_plan
from cpci.upload.errors import EnvelopeError


def plan_for(results: Sequence[str]) -> ShardPlan | None:
    """The plan of the given results files (None when none has one); results files planned
    differently are not one shard's and are refused."""
    plans: dict[str, ShardPlan] = {}
    for path in results:
        where = plan_path(path)
        try:
            plan = read_plan(where)
        except (ValidationError, ValueError) as exc:
            raise EnvelopeError(
                f"{where} is not a cpci.plan/1 file ({exc}); delete it or rerun the shard"
            ) from None
        if plan is not None:
            plans[where] = plan
    if len({p.plan_hash for p in plans.values()}) > 1:
        raise EnvelopeError(
            f"the results files were planned differently ({', '.join(plans)}): upload each "
            "shard's results on their own"
        )
    return next(iter(plans.values()), None)
