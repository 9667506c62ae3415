"""Workflow commands cannot be broken out of by what tests print."""

from __future__ import annotations

from pathlib import Path

from cpci.action.workflow_commands import annotation, write_outputs


def test_annotation_escapes_message_and_properties() -> None:
    line = annotation(
        "error", "line one\nline two ::warning::x 100%", file="a,b:c.py", line=7, title="t"
    )
    assert (
        line == "::error file=a%2Cb%3Ac.py,line=7,title=t::line one%0Aline two ::warning::x 100%25"
    )
    assert "\n" not in line


def test_outputs_use_a_delimiter_the_value_does_not_contain(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_outputs(str(out), {"a": "1", "b": "CPCI_EOF\nsneaky=1"})
    text = out.read_text()
    assert "a<<CPCI_EOF\n1\nCPCI_EOF\n" in text
    assert "b<<CPCI_EOF_\nCPCI_EOF\nsneaky=1\nCPCI_EOF_\n" in text
