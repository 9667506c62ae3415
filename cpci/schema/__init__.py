"""The wire types: every record that crosses from one part of cpci to another.

The runner writes results (`results`), the uploader wraps them in a run envelope (`envelope`),
the service answers each upload with a receipt (`receipts`) and readers with a PR report
(`pull_report`, with `runs` and `flakiness`) whose verdicts come from one table (`verdicts`),
and the GitHub bot and the Action render that report. All of them import these types from here,
and this package imports nothing of cpci (pydantic only), so none of them needs the service's
code or dependencies to read what the service sends.
"""

from cpci.schema.durations import DURATIONS_SCHEMA, ConfigDurations
from cpci.schema.envelope import (
    ENVIRONMENT_LENGTHS,
    RUN_SCHEMA,
    SUPPORTED_RUN_SCHEMAS,
    Environment,
    RunEnvelope,
)
from cpci.schema.fields import (
    INT32_MAX,
    MAX_LEG_LENGTH,
    MAX_SHARDS,
    Finite,
    Identity,
    JSONScalar,
    LegName,
    MetricName,
    WireModel,
)
from cpci.schema.flakiness import (
    FlakeRecord,
    FlakeTest,
    FlakinessAssessment,
    SameCommitEvidence,
)
from cpci.schema.messages import FIRST_LINE_MAX, first_line
from cpci.schema.pull_report import (
    BaselineInfo,
    ConfigVerdict,
    PullRequestReport,
    ReportCounts,
    ReportSectionName,
    ReportSectionPage,
    Shift,
    ShiftFinding,
    Storm,
)
from cpci.schema.receipts import UploadReceipt, UploadStatus
from cpci.schema.results import (
    FAILING_OUTCOMES,
    NOT_RUN_OUTCOMES,
    OUTCOMES,
    RESULT_SCHEMA,
    BatchInfo,
    Isolation,
    Outcome,
    RankError,
    ResultRecord,
    config_id,
    config_key,
    read_results,
)
from cpci.schema.runs import RunLink, RunRef, ShardProgress
from cpci.schema.shard_plan import (
    PLAN_HASH_PATTERN,
    SHARD_PLAN_SCHEMA,
    PlanMismatch,
    ShardPlan,
    plan_path,
    read_plan,
)
from cpci.schema.verdicts import (
    ATTENTION,
    FAILING,
    GATING,
    VERDICTS,
    QuickVerdict,
    Verdict,
    VerdictInfo,
)

__all__ = [
    "ATTENTION",
    "DURATIONS_SCHEMA",
    "ENVIRONMENT_LENGTHS",
    "FAILING",
    "FAILING_OUTCOMES",
    "FIRST_LINE_MAX",
    "GATING",
    "INT32_MAX",
    "MAX_LEG_LENGTH",
    "MAX_SHARDS",
    "NOT_RUN_OUTCOMES",
    "OUTCOMES",
    "PLAN_HASH_PATTERN",
    "RESULT_SCHEMA",
    "RUN_SCHEMA",
    "SHARD_PLAN_SCHEMA",
    "SUPPORTED_RUN_SCHEMAS",
    "VERDICTS",
    "BaselineInfo",
    "BatchInfo",
    "ConfigDurations",
    "ConfigVerdict",
    "Environment",
    "Finite",
    "FlakeRecord",
    "FlakeTest",
    "FlakinessAssessment",
    "Identity",
    "Isolation",
    "JSONScalar",
    "LegName",
    "MetricName",
    "Outcome",
    "PlanMismatch",
    "PullRequestReport",
    "QuickVerdict",
    "RankError",
    "ReportCounts",
    "ReportSectionName",
    "ReportSectionPage",
    "ResultRecord",
    "RunEnvelope",
    "RunLink",
    "RunRef",
    "SameCommitEvidence",
    "ShardPlan",
    "ShardProgress",
    "Shift",
    "ShiftFinding",
    "Storm",
    "UploadReceipt",
    "UploadStatus",
    "Verdict",
    "VerdictInfo",
    "WireModel",
    "config_id",
    "config_key",
    "first_line",
    "plan_path",
    "read_plan",
    "read_results",
]
