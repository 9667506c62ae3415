"""The environment fingerprint of an upload: what the results were produced on.

Flakiness is judged per config *and environment* (the same commit passing on one GPU model and
failing on another is not flakiness), so the fingerprint names torch, CUDA, NCCL, the GPU model
and the process-group backend. torch is optional: where it is missing the fields stay empty.
"""

from __future__ import annotations

import importlib.util
import platform
from collections import Counter
from collections.abc import Sequence

from cpci.schema import ENVIRONMENT_LENGTHS, Environment, ResultRecord


def detect(results: Sequence[ResultRecord] = ()) -> Environment:
    backends = Counter(r.backend for r in results if r.backend)
    values: dict[str, str | None] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "backend": backends.most_common(1)[0][0] if backends else None,
    }
    if importlib.util.find_spec("torch") is not None:
        values.update(_torch())
    return Environment(**{k: _fit(v, ENVIRONMENT_LENGTHS[k]) for k, v in values.items()})


def _fit(value: str | None, limit: int) -> str | None:
    """What the machine reports, as the service can store it: a description this long is
    still told apart by its start (NUL bytes, which no stored text may hold, dropped)."""
    return None if value is None else value.replace("\x00", "")[:limit]


def _torch() -> dict[str, str | None]:
    import torch

    out: dict[str, str | None] = {"torch": str(torch.__version__), "cuda": torch.version.cuda}
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
        nccl = torch.cuda.nccl.version()
        out["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
    return out
