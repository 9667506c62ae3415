"""The code blocks of docs/porting.md as examples that run: files to write, commands, outputs.

Each block the guide means to be run is preceded by an HTML comment (invisible on GitHub) that
names its example and what the block is:

    <!-- run: te file tests/run_attention_with_cp.py -->   a file of example `te`, at that path
    <!-- run: te shell -->                                 commands, run with bash in its folder
    <!-- run: te shell exit=1 -->                          ... that are expected to exit with 1
    <!-- run: te shell addopts="-k p2p" -->                ... with PYTEST_ADDOPTS set (a test's
                                                           narrower selection, to save time)
    <!-- run: te output -->                                what the last commands printed

An example's blocks run in the guide's order in one fresh folder: a later file of the same path
replaces the earlier one (the "before" and "after" of a port). An output block is matched line by
line, in order, against what its commands printed: what differs from run to run matches any
value (seconds like `4.38`, clock times like `0:05`, a `pid` or a `line` number, the `=====`
around pytest's summary), `...` any text (a path), and a line of it lines left out; counts and
everything else are literal. `tests/test_porting.py`
runs every example; `benchmarks/porting.py` times the guide's own before and after.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "porting.md"
_MARKER = re.compile(r"^<!-- run: (?P<spec>.+?) -->\n```[\w-]*\n(?P<body>.*?)^```$", re.M | re.S)

Kind = Literal["file", "shell", "output"]


@dataclass(frozen=True)
class Block:
    """One marked code block of the guide."""

    example: str
    kind: Kind
    text: str
    path: str = ""  # a file's path in the example's folder
    exit: int = 0  # a shell block's expected exit status
    addopts: str = ""  # a shell block's PYTEST_ADDOPTS


@dataclass
class Ran:
    """What one shell block printed, stdout and stderr together, and its exit status."""

    command: str
    status: int
    output: str = field(repr=False)


def blocks(text: str | None = None) -> list[Block]:
    """Every marked block of the guide (or of `text`), in order."""
    found = []
    for match in _MARKER.finditer(GUIDE.read_text() if text is None else text):
        example, kind, *rest = shlex.split(match["spec"])
        options = dict(word.split("=", 1) for word in rest if "=" in word)
        paths = [word for word in rest if "=" not in word]
        if kind not in ("file", "shell", "output") or (kind == "file") != bool(paths):
            raise ValueError(f"docs/porting.md: bad run marker {match['spec']!r}")
        found.append(
            Block(
                example,
                kind,  # type: ignore[arg-type]
                match["body"],
                path=paths[0] if paths else "",
                exit=int(options.get("exit", "0")),
                addopts=options.get("addopts", ""),
            )
        )
    return found


def examples() -> dict[str, list[Block]]:
    """The guide's blocks by example, each in the guide's order."""
    grouped: dict[str, list[Block]] = {}
    for block in blocks():
        grouped.setdefault(block.example, []).append(block)
    return grouped


def write(block: Block, folder: Path) -> None:
    """Write a file block into the example's folder."""
    target = folder / block.path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(block.text)


def run(block: Block, folder: Path, timeout_s: float = 600) -> Ran:
    """Run a shell block with bash in the example's folder, as a reader would in a fresh shell
    of this checkout's environment: its venv first on PATH, no cpci or pytest settings, an
    80-column terminal (pytest's rules and summaries are as wide as the terminal)."""
    bin_dir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CPCI_", "PYTEST_"))}
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    env["COLUMNS"] = "80"
    if block.addopts:
        env["PYTEST_ADDOPTS"] = block.addopts
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", block.text],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout_s,
    )
    return Ran(block.text, done.returncode, done.stdout)


#: What differs from run to run in an output: seconds, clock times, pids, source line numbers,
#: the rules of `=` pytest centres a line of that length in; and `...`, the guide's "any text".
_VARYING = re.compile(r"\d+\.\d+|\d+:\d\d|(?<=pid )\d+|(?<=line )\d+|={3,}|(?<!\.)\.\.\.(?!\.)")


def patterns(output: Block) -> list[str]:
    """An output block's lines as `fnmatch` patterns: what varies (`_VARYING`) matches anything,
    a line `...` is left out, everything else is literal."""
    out = []
    for line in output.text.splitlines():
        if not line.strip() or line.strip() == "...":
            continue
        literal = re.sub(r"[][*?]", lambda m: f"[{m[0]}]", line)
        out.append(_VARYING.sub("*", literal))
    return out
