"""A small pair of policy workers written for the function-level tests, the edits a PR makes to
them, and `git apply` in a scratch repository to prove a suggested patch applies.

The two workers share `train`, `get_logprobs` (v2 says it its own way in one place, away from
where the PRs edit it), `offload` and a shard-plan helper (renamed `build_shard_plan` in v2);
`save_checkpoint` had already diverged; `only_in_v2` exists on one side only.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from cpci.github.drift import Side
from cpci.github.pair_files import PairFile

V1 = "workers/dtensor_policy_worker.py"
V2 = "workers/dtensor_policy_worker_v2.py"
RULES = f"consistency:\n  - {{name: workers, paths: [{V1}, {V2}]}}\n"

WORKER_V1 = '''"""A policy worker."""

import torch


class DTensorPolicyWorker:
    def __init__(self, cfg):
        self.cfg = cfg
        self.cp_size = cfg["cp_size"]
        self.model = None

    def train(self, batch):
        losses = []
        for micro in batch:
            loss = self.model(micro)
            loss.backward()
            losses.append(loss.item())
        return sum(losses) / len(losses)

    def get_logprobs(self, data):
        self.model.eval()
        with torch.no_grad():
            logits = self.model(data)
            logits = logits.float()
        return torch.log_softmax(logits, dim=-1)

    def save_checkpoint(self, path):
        torch.save(self.model.state_dict(), path)

    def offload(self):
        self.model.to("cpu")
        torch.cuda.empty_cache()


def shard_plan(model):
    plan = {}
    for name, _ in model.named_parameters():
        plan[name] = "shard"
    return plan
'''

WORKER_V2 = '''"""A policy worker on the new model API."""

import torch
from automodel import Checkpointer


class DTensorPolicyWorkerV2:
    def __init__(self, cfg):
        self.cfg = cfg
        self.cp_size = cfg["cp_size"]
        self.model = None

    def train(self, batch):
        losses = []
        for micro in batch:
            loss = self.model(micro)
            loss.backward()
            losses.append(loss.item())
        return sum(losses) / len(losses)

    def get_logprobs(self, data):
        self.model.eval()
        with torch.inference_mode():
            logits = self.model(data)
            logits = logits.float()
        return torch.log_softmax(logits, dim=-1)

    def save_checkpoint(self, path):
        checkpointer = Checkpointer(self.cfg["checkpoint"])
        checkpointer.save(self.model, path, format="safetensors")
        checkpointer.wait()

    def offload(self):
        self.model.to("cpu")
        torch.cuda.empty_cache()

    def only_in_v2(self):
        return self.cfg["v2"]


def build_shard_plan(model):
    plan = {}
    for name, _ in model.named_parameters():
        plan[name] = "shard"
    return plan
'''


def edit(text: str, old: str, new: str) -> str:
    """`text` with `old` (which must occur once) replaced by `new`."""
    assert text.count(old) == 1, old
    return text.replace(old, new)


#: The fix every scenario ports: keep `train` from dividing by zero on an empty batch.
EMPTY_BATCH = (
    "        return sum(losses) / len(losses)\n",
    "        return sum(losses) / max(len(losses), 1)\n",
)


class DictReader:
    """A `PairReader` over texts in memory: {(side, path): text}."""

    def __init__(self, texts: Mapping[tuple[Side, str], str]) -> None:
        self.texts = dict(texts)

    def read(self, path: str, side: Side) -> PairFile:
        text = self.texts.get((side, path))
        return PairFile(text, "" if text is not None else f"`{path}` does not exist at {side}")

    def link(self, path: str, side: Side, start: int, end: int) -> str | None:
        return f"https://github.com/o/r/blob/{side}/{path}#L{start}-L{end}"


def pair(
    v1: str = WORKER_V1,
    v2: str = WORKER_V2,
    *,
    v1_head: str | None = None,
    v2_head: str | None = None,
) -> DictReader:
    """A reader over the pair at the base (`v1`, `v2`) and the head (unchanged unless given)."""
    return DictReader(
        {
            ("base", V1): v1,
            ("base", V2): v2,
            ("head", V1): v1 if v1_head is None else v1_head,
            ("head", V2): v2 if v2_head is None else v2_head,
        }
    )


def git_apply(root: Path, files: Mapping[str, str], patch: str) -> dict[str, str]:
    """Apply `patch` with `git apply` in a fresh repository holding `files`; returns the files
    after it (git's error fails the test)."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "port.patch").write_text(patch)
    done = subprocess.run(
        ["git", "-C", str(root), "apply", "port.patch"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return {name: (root / name).read_text() for name in files}
