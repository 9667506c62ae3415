"""Function-level drift on a small pair of workers: which edits warn, which twin is found, and
that the suggested patch is one `git apply` takes (applied for real, in a scratch repository)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpci.github.definitions import definitions
from cpci.github.drift import DriftError, PairDrift, PairVersion, pair_drift
from tests.github.pairs import EMPTY_BATCH, V1, V2, WORKER_V1, WORKER_V2, edit, git_apply


def drift(
    v1_head: str = WORKER_V1, v2_head: str = WORKER_V2, *, v1: str = WORKER_V1, v2: str = WORKER_V2
) -> PairDrift:
    return pair_drift(
        PairVersion(V1, V1, v1, v1_head),
        PairVersion(V2, V2, v2, v2_head),
        threshold=0.75,
        link=lambda path, side, start, end: f"{path}@{side}#L{start}-L{end}",
    )


def test_an_identical_twin_changed_on_one_side_warns_and_its_patch_applies(tmp_path: Path) -> None:
    fixed = edit(WORKER_V2, *EMPTY_BATCH)
    found = drift(v2_head=fixed)
    [one] = found.drifts
    assert (one.function.qualname, one.twin.qualname) == (
        "DTensorPolicyWorkerV2.train",
        "DTensorPolicyWorker.train",
    )
    assert (one.function.path, one.twin.path, one.similarity) == (V2, V1, 1.0)
    assert one.function.url == f"{V2}@head#L13-L19"
    assert one.twin.url == f"{V1}@head#L12-L18"
    assert "-        return sum(losses) / len(losses)\n" in one.hunk
    assert "+        return sum(losses) / max(len(losses), 1)\n" in one.hunk
    assert one.patch is not None
    assert one.patch.startswith(f"diff --git a/{V1} b/{V1}\n--- a/{V1}\n+++ b/{V1}\n")
    after = git_apply(tmp_path, {V1: WORKER_V1}, one.patch)
    assert after[V1] == edit(WORKER_V1, *EMPTY_BATCH)
    assert (found.one_sided, found.diverged) == ([], [])


def test_a_twin_that_had_diverged_does_not_warn() -> None:
    changed = edit(WORKER_V2, 'format="safetensors"', 'format="torch_save"')
    found = drift(v2_head=changed)
    assert found.drifts == []
    assert found.diverged == ["DTensorPolicyWorkerV2.save_checkpoint"]


def test_a_function_on_one_side_only_does_not_warn() -> None:
    changed = edit(WORKER_V2, 'return self.cfg["v2"]', 'return self.cfg.get("v2", True)')
    added = edit(WORKER_V1, "def shard_plan", "def fresh(self):\n    return 1\n\n\ndef shard_plan")
    found = drift(v1_head=added, v2_head=changed)
    assert found.drifts == []
    assert sorted(found.one_sided) == ["DTensorPolicyWorkerV2.only_in_v2", "fresh"]


def test_a_renamed_twin_is_found_by_similarity(tmp_path: Path) -> None:
    """`shard_plan` is `build_shard_plan` in v2: no name matches, the body does."""
    changed = edit(WORKER_V1, '"shard"', '"replicate" if "norm" in name else "shard"')
    [one] = drift(v1_head=changed).drifts
    assert (one.function.qualname, one.twin.qualname) == ("shard_plan", "build_shard_plan")
    assert one.patch is not None
    after = git_apply(tmp_path, {V2: WORKER_V2}, one.patch)
    assert 'plan[name] = "replicate" if "norm" in name else "shard"' in after[V2]


def test_a_function_moved_into_a_class_is_the_same_function(tmp_path: Path) -> None:
    """The twin of a method may be a module-level function: the patch takes the twin's
    indentation."""
    v2 = edit(WORKER_V2, "\n\ndef build_shard_plan(model):\n", "\n\ndef unused():\n")
    v2 = edit(
        v2,
        "    def only_in_v2(self):\n",
        "    def shard_plan(model):\n        plan = {}\n"
        "        for name, _ in model.named_parameters():\n"
        '            plan[name] = "shard"\n        return plan\n\n    def only_in_v2(self):\n',
    )
    v1_head = edit(WORKER_V1, '"shard"', '"replicate"')
    [one] = drift(v1_head=v1_head, v2=v2, v2_head=v2).drifts
    assert one.twin.qualname == "DTensorPolicyWorkerV2.shard_plan"
    assert one.patch is not None
    after = git_apply(tmp_path, {V2: v2}, one.patch)
    assert '            plan[name] = "replicate"\n' in after[V2]


def test_both_sides_changed_alike_do_not_warn() -> None:
    assert drift(edit(WORKER_V1, *EMPTY_BATCH), edit(WORKER_V2, *EMPTY_BATCH)).drifts == []
    # Alike, not identical: the port spells the variable differently.
    ported = edit(WORKER_V1, *EMPTY_BATCH).replace("max(len(losses), 1)", "max(1, len(losses))")
    assert drift(ported, edit(WORKER_V2, *EMPTY_BATCH)).drifts == []


def test_both_sides_changed_otherwise_warn() -> None:
    v1 = edit(WORKER_V1, *EMPTY_BATCH)
    v2 = edit(
        WORKER_V2, "            loss.backward()\n", "            self.scaler(loss).backward()\n"
    )
    [one] = drift(v1, v2).drifts
    assert one.twin_changed
    assert one.function.qualname == "DTensorPolicyWorker.train"


def test_the_patch_keeps_the_twins_own_lines_where_the_change_does_not_touch_them(
    tmp_path: Path,
) -> None:
    """v2's `get_logprobs` says `inference_mode` where v1 says `no_grad`: a change elsewhere in
    the function still merges, and v2 keeps its own line."""
    changed = edit(
        WORKER_V1, "            logits = logits.float()\n", "            logits = logits.double()\n"
    )
    [one] = drift(v1_head=changed).drifts
    assert one.similarity < 1.0
    assert one.patch is not None
    after = git_apply(tmp_path, {V2: WORKER_V2}, one.patch)
    assert "with torch.inference_mode():" in after[V2]
    assert "logits = logits.double()" in after[V2]


def test_a_change_where_the_twin_differs_has_no_patch_and_says_where() -> None:
    changed = edit(WORKER_V1, "with torch.no_grad():", "with torch.no_grad(), self.ctx():")
    [one] = drift(v1_head=changed).drifts
    assert one.patch is None
    assert "does not apply cleanly to `DTensorPolicyWorkerV2.get_logprobs`" in one.patch_problem
    assert "near line 23)" in one.patch_problem
    assert "port it by hand" in one.patch_problem


def test_a_removed_function_warns_without_a_patch() -> None:
    removed = edit(
        WORKER_V2,
        '    def offload(self):\n        self.model.to("cpu")\n'
        "        torch.cuda.empty_cache()\n\n",
        "",
    )
    [one] = drift(v2_head=removed).drifts
    assert (one.change, one.function.url) == ("removed", f"{V2}@base#L33-L35")
    assert one.patch is None
    assert "remove it too where nothing calls it" in one.patch_problem


def test_a_file_that_is_not_python_is_said() -> None:
    with pytest.raises(DriftError, match=rf"`{V2}` at head is not Python \(line 1"):
        drift(v2_head="def broken(:\n")


def test_definitions_and_their_lines() -> None:
    source = (
        "import x\n\n"
        "@decorate\n"
        "def top():\n"
        "    def inner():\n"
        "        return 1\n"
        "    return inner\n\n"
        "class A:\n"
        "    @property\n"
        "    def v(self):\n"
        "        return 1\n\n"
        "    @v.setter\n"
        "    def v(self, value):\n"
        "        pass\n\n"
        "    class B:\n"
        "        async def go(self):\n"
        "            '''a form feed \x0c inside a string'''\n"
        "            pass\n\n"
        "if x:\n"
        "    def maybe():\n"
        "        pass\n"
    )
    found = [(d.qualname, d.start, d.end) for d in definitions(source)]
    assert found == [
        ("top", 3, 7),
        ("A.v", 10, 12),
        ("A.v#2", 14, 16),
        ("A.B.go", 19, 21),
        ("maybe", 24, 25),
    ]
