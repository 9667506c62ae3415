"""The environment fingerprint: what the results ran on, so flakiness is judged per environment."""

from __future__ import annotations

import platform

from cpci.schema import ENVIRONMENT_LENGTHS, ResultRecord
from cpci.upload.environment import detect
from tests.prerequisites import import_or_skip


def ran_on(backend: str | None) -> ResultRecord:
    return ResultRecord(
        nodeid="t.py::test", world_size=2, outcome="passed", duration_s=1.0, backend=backend
    )


def test_the_backend_is_the_one_most_results_ran_on() -> None:
    results = [ran_on("gloo"), ran_on("nccl"), ran_on("nccl"), ran_on(None)]
    environment = detect(results)
    assert environment.backend == "nccl"
    assert environment.python == platform.python_version()
    assert detect([]).backend is None  # JUnit suites name no backend


def test_a_description_longer_than_the_service_stores_is_cut_to_fit() -> None:
    long = "gloo-" + "x" * 100  # a custom backend's name
    environment = detect([ran_on(long)])
    assert environment.backend == long[: ENVIRONMENT_LENGTHS["backend"]]
    assert detect([ran_on("a\x00b")]).backend == "ab"


def test_torch_fields_come_from_the_installed_torch() -> None:
    torch = import_or_skip("torch", "torch", "the torch fields are read from torch")
    environment = detect()
    assert environment.torch == str(torch.__version__)
    assert environment.cuda == torch.version.cuda
    if not torch.cuda.is_available():
        assert environment.gpu is None
        assert environment.nccl is None
