"""JUnit XML to cpci.result/1: the reference files from many runners, checked against the counts
that publish-unit-test-result-action expects for them."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from cpci.upload.errors import JUnitError
from cpci.upload.junit import read_junit
from tests.upload.support import reference_junit

#: Where our count differs from that action's on purpose: it trusts a suite's `tests=`
#: attribute when there are no <testcase> elements (we report what ran), and counts every
#: result element of a multi-result case as a run (we take the case's worst outcome, which is
#: its `tests_*` count).
DIVERGES = {"junit-xml/no-cases-but-tests.xml": "tests claimed by attributes only"}
PER_TEST = {"junit-xml/junit.multiresult.xml"}
MALFORMED = {
    "junit-xml/pytest/corrupt-xml.xml": r"corrupt-xml\.xml:11:\d+: not well-formed XML",
    "xml/empty.xml": r"empty\.xml: the file is empty",
    "xml/non-xml.xml": r"non-xml\.xml:1:\d+: not well-formed XML",
    "junit-xml/non-junit.xml": r"root element is <suites>.*not a JUnit XML file",
}


def _inputs() -> list[str]:
    try:
        root = reference_junit()
    except pytest.skip.Exception:
        return []
    files = [p for p in root.rglob("*") if p.is_file() and "expected" not in p.parts]
    return sorted(str(p.relative_to(root)) for p in files)


def _counts(records: list) -> tuple[int, int, int, int, int]:  # type: ignore[type-arg]
    c = Counter(r.outcome for r in records)
    return len(records), c["passed"], c["skipped"], c["failed"], c["error"]


@pytest.mark.parametrize("name", _inputs() or ["(shared/reference absent)"])
def test_reference_file(name: str) -> None:
    root = reference_junit()
    if name in MALFORMED:
        with pytest.raises(JUnitError, match=MALFORMED[name]):
            read_junit(root / name)
        return
    records = read_junit(root / name)
    expected_path = root / "expected" / Path(name).with_suffix(".results.json")
    stats = json.loads(expected_path.read_text(encoding="utf-8"))["stats"]
    kind = "tests" if name in PER_TEST else "runs"
    expected = tuple(stats[f"{kind}{s}"] for s in ("", "_succ", "_skip", "_fail", "_error"))
    if name in DIVERGES:
        assert _counts(records) == (0, 0, 0, 0, 0)
        return
    assert _counts(records) == expected


def test_messages_entities_and_unicode_survive() -> None:
    records = read_junit(reference_junit() / "junit-xml/with-xml-entities.xml")
    text = json.dumps([r.model_dump(mode="json") for r in records], ensure_ascii=False)
    assert '"' in text
    assert "&" in text
    assert "<" in text
    records = read_junit(reference_junit() / "junit-xml/unsupported-unicode.xml")
    assert any(
        "\U0001237a" in r.nodeid or any("\U0001237a" in e.message for e in r.rank_errors)
        for r in records
    )


def test_failure_message_rerun_attempts_and_flaky(tmp_path: Path) -> None:
    xml = tmp_path / "r.xml"
    xml.write_text(
        '<testsuite name="s"><testcase classname="m.T" name="t" time="1.5">'
        '<failure message="boom">Traceback\nboom</failure></testcase>'
        '<testcase classname="m.T" name="t" time="0.5"/>'
        '<testcase classname="m.T" name="u"><flakyFailure message="once"/></testcase>'
        '<testcase name="" time="-3"/></testsuite>'
    )
    a, b, u, anon = read_junit(xml)
    assert (a.nodeid, a.outcome, a.attempt, a.duration_s) == ("m.T::t", "failed", 1, 1.5)
    assert (a.rank_errors[0].message, a.rank_errors[0].detail) == ("boom", "Traceback\nboom")
    assert (b.outcome, b.attempt) == ("passed", 2)
    assert (u.outcome, u.flaky) == ("passed", True)
    assert (anon.nodeid, anon.duration_s) == ("s::testcase-3", 0.0)
