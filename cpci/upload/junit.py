"""JUnit XML from any test runner, as `cpci.result/1` records, so non-cpci suites are tracked too.

One record per `<testcase>`, wherever it is nested. Its outcome is the worst of its result
elements (error > failure > skipped > passed; surefire's `flakyFailure` alone is a flaky pass).
A test id seen again in the same file is a rerun: its `attempt` counts up. Such suites run in
one process, so `world_size` is 1.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from cpci.schema import Outcome, RankError, ResultRecord, first_line
from cpci.upload.errors import JUnitError

_FAILURES = {"error": "error", "failure": "failed"}
_FLAKY = ("flakyFailure", "flakyError", "rerunFailure", "rerunError")
MAX_NODEID = 2_000


def read_junit(path: str | Path) -> list[ResultRecord]:
    """The records of one JUnit XML file."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise JUnitError(f"{path}: cannot read it ({exc.strerror})") from exc
    if not data.strip():
        raise JUnitError(f"{path}: the file is empty (did the test run write its report?)")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        line, column = exc.position
        raise JUnitError(
            f"{path}:{line}:{column}: not well-formed XML ({exc}); a truncated file usually "
            "means the test run was killed while writing it"
        ) from exc
    if _local(root.tag) not in ("testsuites", "testsuite"):
        raise JUnitError(
            f"{path}: the root element is <{_local(root.tag)}>, not <testsuites> or <testsuite>: "
            "not a JUnit XML file"
        )
    return convert(root, fallback=path.name)


def convert(root: ET.Element, *, fallback: str) -> list[ResultRecord]:
    records: list[ResultRecord] = []
    seen: Counter[str] = Counter()
    for suite, case, index in _cases(root):
        nodeid = _nodeid(case, suite, fallback, index)
        seen[nodeid] += 1
        outcome, errors, flaky = _outcome(case)
        records.append(
            ResultRecord(
                nodeid=nodeid,
                world_size=1,
                outcome=outcome,
                duration_s=_seconds(case.get("time")),
                rank_errors=errors,
                attempt=seen[nodeid],
                flaky=flaky,
            )
        )
    return records


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _cases(root: ET.Element) -> list[tuple[ET.Element, ET.Element, int]]:
    """(innermost suite, case, index) for every testcase, in document order."""
    found: list[tuple[ET.Element, ET.Element, int]] = []

    def walk(node: ET.Element, suite: ET.Element) -> None:
        for child in node:
            tag = _local(child.tag)
            if tag == "testcase":
                found.append((suite, child, len(found)))
            elif tag in ("testsuite", "testsuites"):
                walk(child, child)

    walk(root, root)
    return found


def _nodeid(case: ET.Element, suite: ET.Element, fallback: str, index: int) -> str:
    name = (case.get("name") or "").strip()
    classname = (case.get("classname") or "").strip()
    if not name:
        name = f"testcase-{index}"
        classname = classname or (suite.get("name") or "").strip() or fallback
    nodeid = f"{classname}::{name}" if classname else name
    return nodeid[:MAX_NODEID]


def _outcome(case: ET.Element) -> tuple[Outcome, list[RankError], bool]:
    children = {_local(c.tag): c for c in reversed(list(case))}
    for tag, outcome in _FAILURES.items():
        if tag in children:
            return outcome, [_error(children[tag], tag)], False  # type: ignore[return-value]
    flaky = any(tag in children for tag in _FLAKY)
    if "skipped" in children:
        return "skipped", [], False
    return "passed", [], flaky


def _error(element: ET.Element, tag: str) -> RankError:
    text = (element.text or "").strip()
    message = (element.get("message") or "").strip() or first_line(text, limit=None)
    kind = element.get("type")
    if not message:
        message = kind or tag
    return RankError(rank=-1, phase="call", message=message[:2_000], detail=text[:200_000])


def _seconds(value: str | None) -> float:
    try:
        seconds = float(value or 0)
    except ValueError:
        return 0.0
    return seconds if seconds >= 0 and seconds == seconds else 0.0
