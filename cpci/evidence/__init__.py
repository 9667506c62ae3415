"""The evidence rules the service judges by and the runner reruns by: one implementation.

Torch-free and server-free (it imports `cpci.schema` only), so the runner decides a rerun with
the very code the service decides a verdict with:

- `chance`: regression or flake? `flake_test` weighs k failed attempts against a config's
  record (`EvidencePolicy`: threshold and credible level);
- `credible`: the Jeffreys upper bound on a failure rate that test rests on;
- `signatures`: a failure's signature (`signature`, `culprit_error`, `record_signature`);
- `reruns`: `decide_rerun(attempts, evidence, rule) -> RerunDecision` (`RerunRule`: adaptive
  or fixed, the cap);
- `arrival`: `arrival_runs`, the extra runs of a config new to the base branch;
- `release`: when a quarantined config's evidence releases it (`releasable`,
  `passes_to_release`).

The runner reads the evidence from the service's summary (`cpci.schema.EvidenceSummary`,
`GET /api/v1/repos/OWNER/REPO/evidence?branch=BRANCH`), one `ConfigEvidence` per config key.
"""

from cpci.evidence.arrival import arrival_runs
from cpci.evidence.chance import EvidencePolicy, flake_test, tally_signatures
from cpci.evidence.credible import jeffreys_upper
from cpci.evidence.release import MOST_PASSES, passes_to_release, releasable
from cpci.evidence.reruns import (
    DEFAULT_CAPS,
    RERUN_MODES,
    RERUN_OUTCOMES,
    DecisionKind,
    RerunDecision,
    RerunMode,
    RerunRule,
    decide_rerun,
)
from cpci.evidence.signatures import culprit_error, record_signature, signature

__all__ = [
    "DEFAULT_CAPS",
    "MOST_PASSES",
    "RERUN_MODES",
    "RERUN_OUTCOMES",
    "DecisionKind",
    "EvidencePolicy",
    "RerunDecision",
    "RerunMode",
    "RerunRule",
    "arrival_runs",
    "culprit_error",
    "decide_rerun",
    "flake_test",
    "jeffreys_upper",
    "passes_to_release",
    "record_signature",
    "releasable",
    "signature",
    "tally_signatures",
]
