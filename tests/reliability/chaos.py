"""Runner chaos: a generated suite whose ranks SIGKILL themselves, segfault, exit or hang.

The faults are decided from a seed, so a failing run can be replayed exactly: config `i` faults
when `i` is among `random.Random(seed).sample(...)`, and `random.Random(seed + i)` picks the kind,
the rank and the point (before or after the config's collective). The run is a real pytest
subprocess with `--cpci-results`; while it runs, every complete line of the results file must be
a valid `cpci.result/1` record, and when it ends every config must be accounted for exactly once
with the outcome its fault implies, and no process of the run may survive.

Shared by `tests/reliability/test_chaos.py` (small) and `benchmarks/reliability_chaos.py` (full).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from cpci.schema import ResultRecord

#: fault kind -> the outcome the runner must report for the config it hits.
EXPECTED = {
    "sigkill": "crashed",
    "segfault": "crashed",
    "exit": "crashed",
    "hang": "timeout",
    "fail": "failed",
    None: "passed",
}
KINDS = ("sigkill", "segfault", "exit", "hang", "fail")
POINTS = ("before", "after")
WORLD_SIZE = 2

SUITE = """
import json, os, signal, time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

PLAN = json.loads((Path(__file__).parent / "chaos_plan.json").read_text())


def strike(kind):
    if kind == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif kind == "exit":
        os._exit(13)
    elif kind == "hang":
        time.sleep(600)
    elif kind == "fail":
        raise AssertionError("chaos: planned failure")


@pytest.mark.cpci(world_size={world_size}, timeout={timeout})
@pytest.mark.parametrize("i", range({configs}))
def test_config(i, cpci_dist):
    fault = PLAN.get(str(i))
    mine = fault is not None and fault["rank"] == cpci_dist.rank
    if mine and fault["point"] == "before":
        strike(fault["kind"])
    t = torch.ones(4) * (cpci_dist.rank + 1)
    dist.all_reduce(t)
    assert t[0].item() == {total}
    if mine and fault["point"] == "after":
        strike(fault["kind"])
"""


@dataclass(frozen=True)
class Fault:
    kind: str
    rank: int
    point: str


def plan_faults(configs: int, faults: int, seed: int) -> dict[int, Fault]:
    """Which configs fault and how: deterministic in `seed`."""
    chosen = random.Random(seed).sample(range(configs), faults)
    plan = {}
    for i in sorted(chosen):
        rng = random.Random(seed + i)
        kind = rng.choice(KINDS)
        # A failed assertion before the collective would leave the partner waiting in it (a
        # hang, reported as timeout): a plain failure strikes after the collective.
        point = "after" if kind == "fail" else rng.choice(POINTS)
        plan[i] = Fault(kind, rng.randrange(WORLD_SIZE), point)
    return plan


def write_suite(path: Path, configs: int, plan: dict[int, Fault], timeout_s: float) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "chaos_plan.json").write_text(
        json.dumps({str(i): f.__dict__ for i, f in plan.items()}, indent=1)
    )
    total = sum(range(1, WORLD_SIZE + 1))
    (path / "test_chaos_suite.py").write_text(
        SUITE.format(world_size=WORLD_SIZE, timeout=timeout_s, configs=configs, total=total)
    )


def nodeid(i: int) -> str:
    return f"test_chaos_suite.py::test_config[{i}]"


@dataclass
class ChaosRun:
    """What one chaos run did, and what is wrong with it (`problems` empty when all is well)."""

    configs: int
    plan: dict[int, Fault]
    returncode: int
    wall_s: float
    records: list[ResultRecord]
    outcomes: Counter[str]
    lines_checked: int
    survivors: list[str]
    problems: list[str] = field(default_factory=list)
    stdout: str = ""

    @property
    def accounted(self) -> int:
        return len({r.nodeid for r in self.records} & {nodeid(i) for i in range(self.configs)})


def _complete_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return text.split("\n")[:-1]  # the part after the last newline may be mid-write


def _processes_tagged(tag: str) -> list[str]:
    """Live processes (not zombies) whose environment, command line or cwd carry `tag`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = (entry / "stat").read_text()
            if stat[stat.rindex(")") + 2] == "Z":
                continue
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes()
            cwd = os.readlink(entry / "cwd")
        except (OSError, ValueError, IndexError):
            continue  # gone, or not ours to read
        if tag.encode() in environ or tag.encode() in cmdline or tag in cwd:
            name = cmdline.replace(b"\0", b" ").decode(errors="replace")[:200]
            found.append(f"{entry.name}: {name}")
    return found


def run_chaos(
    workdir: Path,
    *,
    configs: int,
    faults: int,
    seed: int,
    timeout_s: float = 3.0,
    batch_size: int = 16,
    deadline_s: float = 600.0,
) -> ChaosRun:
    """Run the chaos suite once and check it; the caller asserts `problems == []`."""
    plan = plan_faults(configs, faults, seed)
    tag = f"cpci-chaos-{uuid.uuid4().hex}"
    suite = workdir / tag
    write_suite(suite, configs, plan, timeout_s)
    results = suite / "results.jsonl"
    respawns = faults + 1  # every crash may cost a world; none may leave a config unrun
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        f"--cpci-results={results}",
        f"--cpci-batch-size={batch_size}",
        f"--cpci-max-respawns={respawns}",
        "--cpci-progress-interval=3600",
    ]
    env = {**os.environ, "CPCI_CHAOS_TAG": tag, "PYTHONFAULTHANDLER": "0"}
    start = time.monotonic()
    proc = subprocess.Popen(
        command, cwd=suite, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    problems: list[str] = []
    checked = 0
    out: list[str] = []  # stdout is drained on a thread while the results file is polled here
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read() if proc.stdout else ""))
    reader.start()
    while proc.poll() is None:
        lines = _complete_lines(results)
        for number, line in enumerate(lines[checked:], start=checked + 1):
            try:
                ResultRecord.model_validate_json(line)
            except ValueError as exc:
                problems.append(f"results line {number} invalid while running: {exc}")
        checked = max(checked, len(lines))
        if time.monotonic() - start > deadline_s:
            proc.kill()
            problems.append(f"the run did not finish within {deadline_s} s")
            break
        time.sleep(0.1)
    proc.wait()
    reader.join(timeout=30)
    if proc.stdout:
        proc.stdout.close()
    wall = time.monotonic() - start

    final = _complete_lines(results)
    if results.exists() and not results.read_text(encoding="utf-8").endswith("\n"):
        problems.append("the results file does not end with a newline after the run")
    records = []
    for number, line in enumerate(final, start=1):
        try:
            records.append(ResultRecord.model_validate_json(line))
        except ValueError as exc:
            problems.append(f"results line {number} invalid after the run: {exc}")
    seen = Counter(r.nodeid for r in records)
    for i in range(configs):
        want = EXPECTED[plan[i].kind if i in plan else None]
        count = seen.pop(nodeid(i), 0)
        if count != 1:
            problems.append(f"config {i}: {count} records, want exactly 1")
            continue
        got = next(r for r in records if r.nodeid == nodeid(i))
        if got.outcome != want:
            problems.append(f"config {i} ({plan.get(i)}): outcome {got.outcome}, want {want}")
    problems.extend(f"unexpected record {n!r} x{c}" for n, c in seen.items())

    # The ranks must be gone: poll (the launcher reaps them as the world ends), bounded.
    deadline = time.monotonic() + 15
    survivors = _processes_tagged(tag)
    while survivors and time.monotonic() < deadline:
        time.sleep(0.1)
        survivors = _processes_tagged(tag)
    problems.extend(f"orphan process left behind: {s}" for s in survivors)
    return ChaosRun(
        configs=configs,
        plan=plan,
        returncode=proc.returncode,
        wall_s=wall,
        records=records,
        outcomes=Counter(r.outcome for r in records),
        lines_checked=checked,
        survivors=survivors,
        problems=problems,
        stdout="".join(out),
    )
