"""GitHub Actions workflow commands, outputs and the job summary, escaped as GitHub documents.

Messages come from test ids and failure text, so they are escaped: a newline or `::` inside a
message must not end the command or start another one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(
    level: str, message: str, *, file: str | None = None, line: int | None = None, title: str = ""
) -> str:
    """`::error file=F,line=N,title=T::message` with every part escaped."""
    props = []
    if file:
        props.append(f"file={_escape_property(file)}")
    if line:
        props.append(f"line={line}")
    if title:
        props.append(f"title={_escape_property(title)}")
    head = f"::{level} {','.join(props)}" if props else f"::{level}"
    return f"{head}::{_escape_data(message)}"


def write_outputs(path: str | None, outputs: Mapping[str, str]) -> None:
    """Append step outputs to `$GITHUB_OUTPUT` (multi-line safe delimiter syntax)."""
    if not path:
        return
    with open(path, "a", encoding="utf-8") as fh:
        for name, value in outputs.items():
            delimiter = "CPCI_EOF"
            while delimiter in value:
                delimiter += "_"
            fh.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")


def write_summary(path: str | None, markdown: str) -> None:
    """Append to `$GITHUB_STEP_SUMMARY`; outside Actions this prints nothing."""
    if path:
        with Path(path).open("a", encoding="utf-8") as fh:
            fh.write(markdown)
