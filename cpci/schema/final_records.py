"""A config's final record: what it came to, among the attempts a results file holds.

The runner writes a record per attempt (a failure, then each rerun, each isolation replay), so a
file with reruns has more records than configs. What a config came to is its last attempt
(passed with `flaky`, or the last failure with its `failed N/N attempts` note); counting every
record counts reruns as configs.
"""

from __future__ import annotations

from collections.abc import Iterable

from cpci.schema.results import ResultRecord


def final_records(records: Iterable[ResultRecord]) -> list[ResultRecord]:
    """Each config's record with the highest attempt (the later one on a tie), in the order the
    configs first appear."""
    final: dict[str, ResultRecord] = {}
    for record in records:
        held = final.get(record.config_key)
        if held is None or record.attempt >= held.attempt:
            final[record.config_key] = record
    return list(final.values())
