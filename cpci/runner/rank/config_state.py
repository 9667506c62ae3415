"""Process state reset around each config, so configs sharing a world cannot leak into each other.

Seeds are derived from the node id, so a config sees the same random numbers whether it runs first
in a fresh world or fifteenth in a shared one. Environment variables the config set are undone,
and every process group created during the config is destroyed, even when the config failed.
Process-wide torch settings (default dtype and device, grad mode, deterministic algorithms, threads,
float32 matmul precision, TF32, cuDNN benchmark/deterministic, the SDPA backends) are put back,
and on CUDA the config's kernels are waited for and its cached memory freed. Library state torch
does not own (Megatron's parallel_state, TransformerEngine caches) is reset by the
`pytest_cpci_reset` hook (`cpci.runner.hookspecs`).
"""

from __future__ import annotations

import gc
import os
import random
import sys
import zlib
from collections.abc import Callable
from types import TracebackType
from typing import Any, NamedTuple


def seed_for(nodeid: str) -> int:
    """A stable per-config seed (crc32 of the node id)."""
    return zlib.crc32(nodeid.encode())


class _Flag(NamedTuple):
    """One process-wide torch setting: how to read it and how to put it back."""

    name: str
    get: Callable[[], Any]
    put: Callable[[Any], None]


def _torch_flags() -> tuple[_Flag, ...]:
    """Every process-wide torch setting a config may change and the next one must not see."""
    import torch

    cuda, cudnn = torch.backends.cuda, torch.backends.cudnn

    def attr(obj: Any, name: str) -> _Flag:
        return _Flag(name, lambda: getattr(obj, name), lambda v: setattr(obj, name, v))

    def sdp(kind: str) -> _Flag:
        return _Flag(
            f"{kind}_sdp",
            getattr(cuda, f"{kind}_sdp_enabled"),
            getattr(cuda, f"enable_{kind}_sdp"),
        )

    def put_device(device: Any) -> None:
        # None, not "cpu": an explicit default device costs a mode push on every factory call.
        torch.set_default_device(None if device == torch.device("cpu") else device)

    def put_deterministic(state: tuple[bool, bool]) -> None:
        torch.use_deterministic_algorithms(state[0], warn_only=state[1])

    return (
        _Flag("dtype", torch.get_default_dtype, torch.set_default_dtype),
        _Flag("grad", torch.is_grad_enabled, torch.set_grad_enabled),
        _Flag(
            "deterministic",
            lambda: (
                torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled(),
            ),
            put_deterministic,
        ),
        _Flag("threads", torch.get_num_threads, torch.set_num_threads),
        # Precision before the TF32 switches: setting it also sets matmul.allow_tf32.
        _Flag(
            "float32_matmul_precision",
            torch.get_float32_matmul_precision,
            torch.set_float32_matmul_precision,
        ),
        attr(cuda.matmul, "allow_tf32"),
        attr(cudnn, "allow_tf32"),
        attr(cudnn, "benchmark"),
        attr(cudnn, "deterministic"),
        *(sdp(kind) for kind in ("flash", "mem_efficient", "math", "cudnn")),
        _Flag("default_device", torch.get_default_device, put_device),
    )


class ConfigState:
    """Context manager: seed on entry; restore env, torch flags and groups on exit."""

    def __init__(self, nodeid: str) -> None:
        self._nodeid = nodeid
        self._env: dict[str, str] = {}
        self._flags: tuple[_Flag, ...] = ()
        self._before: tuple[Any, ...] = ()
        self._groups: set[Any] = set()

    def __enter__(self) -> ConfigState:
        import torch

        self._env = dict(os.environ)
        self._flags = _torch_flags()
        self._before = tuple(flag.get() for flag in self._flags)
        self._groups = set(_live_groups())
        seed = seed_for(self._nodeid)
        random.seed(seed)
        torch.manual_seed(seed)
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            numpy.random.seed(seed)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        import torch
        import torch.distributed as dist

        try:
            made = set(_live_groups()) - self._groups
            for group in made:
                dist.destroy_process_group(group)
            if made:
                _free_failed_frames()
        finally:
            os.environ.clear()
            os.environ.update(self._env)
            # Restore only what changed: the first use_deterministic_algorithms() call alone
            # costs about a second of imports.
            assert len(self._before) == len(self._flags), "__exit__ without __enter__"
            for flag, before in zip(self._flags, self._before, strict=True):
                if flag.get() != before:
                    flag.put(before)
            if torch.cuda.is_initialized():
                torch.cuda.synchronize()
                torch.cuda.empty_cache()


def _free_failed_frames() -> None:
    """Free the groups a failed config's traceback still holds, so their connections close now.

    Destroying a gloo group only unregisters it: its connections close when the object goes,
    and a failed test's frames hold it (its `cp_group` local), through `sys.last_traceback`,
    which pytest keeps for post-mortem debugging, and the reference cycle of a caught exception.
    Stock, the failed rank exits and its peers' collectives fail at once; here they would wait
    out the config's timeout. Collecting only after a call failed keeps passing configs free.
    """
    if getattr(sys, "last_traceback", None) is None:
        return
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, name):
            delattr(sys, name)
    gc.collect()


def _live_groups() -> list[Any]:
    """Every process group but the default one (c10d keeps no public list of them)."""
    import torch.distributed.distributed_c10d as c10d

    default = c10d._get_default_group() if c10d.is_initialized() else None
    return [pg for pg in c10d._world.pg_map if pg is not default]
