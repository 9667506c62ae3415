"""The torch_cp adapter's version gate: it skips, naming what is missing, on a torch without
the CP API torchtitan uses (simulated here by hiding one symbol or the whole module)."""

from __future__ import annotations

import importlib
import sys

import pytest
import torch

from cpci.cp import torch_cp
from cpci.cp.adapters import ADAPTERS
from cpci.cp.harness import CaseSpec

SPEC = CaseSpec(dtype=torch.bfloat16, head_dim=64, seq=128)


def test_this_torch_has_the_api() -> None:
    """torch 2.13 has every symbol; if an upgrade drops one, this says which."""
    api = torch_cp.load()
    assert not isinstance(api, str), api


@pytest.mark.parametrize("symbol", torch_cp.SYMBOLS)
def test_missing_symbol_skips_naming_it_and_the_torch_version(
    monkeypatch: pytest.MonkeyPatch, symbol: str
) -> None:
    module = importlib.import_module(torch_cp.MODULE)
    monkeypatch.delattr(module, symbol)
    reason = ADAPTERS["torch_cp"].why_not(SPEC, "cuda")
    assert reason is not None
    assert f"{torch_cp.MODULE}.{symbol}" in reason
    assert f"torch {torch.__version__}" in reason
    with pytest.raises(RuntimeError, match=symbol):
        torch_cp.prepare(SPEC, None)


def test_missing_module_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, torch_cp.MODULE, None)  # import raises ImportError
    reason = torch_cp.why_not(SPEC, "cuda")
    assert reason is not None
    assert reason.startswith(f"torch {torch.__version__} has no {torch_cp.MODULE}")


@pytest.mark.parametrize(
    ("spec", "device", "reason"),
    [
        (SPEC, "cpu", "needs CUDA: torch"),
        (CaseSpec(causal=False, load_balance=True), "cuda", "refuses load balancing"),
        (CaseSpec(heads_q=4, heads_kv=2, load_balance=False), "cuda", "no GQA"),
    ],
)
def test_configs_it_cannot_run_say_why(spec: CaseSpec, device: str, reason: str) -> None:
    why = torch_cp.why_not(spec, device)
    assert why is not None
    assert reason in why


def test_config_it_can_run_on_cuda() -> None:
    assert torch_cp.why_not(SPEC, "cuda") is None
