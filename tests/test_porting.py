"""docs/porting.md runs as written: each example's files written, its commands run in a fresh
folder with real worlds, and what they print matched against the output the guide shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.porting_guide import GUIDE, Ran, blocks, examples, patterns, run, write

EXAMPLES = examples()


def test_every_code_block_of_the_guide_is_run() -> None:
    text = GUIDE.read_text()
    fences = len(re.findall(r"^```[\w-]*$\n", text, re.M)) // 2
    assert fences == len(blocks()), (
        "docs/porting.md has a code block without a <!-- run: ... --> marker "
        "(see tests/porting_guide.py): every snippet of the guide is run by this test"
    )


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_guides_example_runs_as_written(name: str, tmp_path: Path) -> None:
    last: Ran | None = None
    for block in EXAMPLES[name]:
        if block.kind == "file":
            write(block, tmp_path)
        elif block.kind == "shell":
            last = run(block, tmp_path)
            assert last.status == block.exit, f"{last.command}\n{last.output}"
        else:
            assert last is not None, f"example {name}: an output block before any command"
            pytest.LineMatcher(last.output.splitlines()).fnmatch_lines(patterns(block))
