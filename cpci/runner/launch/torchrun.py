"""A world started by torchrun: `python -m torch.distributed.run --standalone`, one shim per rank.

Each rank's program is `cpci.runner.launch.shim`, which runs the rank's worker as its child and
records how it ended (`rank-N.exit`), since torchrun reports exit codes only as text. The variables
torchrun's agent gives its workers (`torchrun_env`) are also what a forked rank gets.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cpci.runner.launch.processes import kill_tree
from cpci.runner.wire.world_dir import WorldDir


class TorchrunRanks:
    """A world under `torch.distributed.run`; each rank's shim records its exit."""

    def __init__(self, world_dir: WorldDir, world_size: int, env: dict[str, str]) -> None:
        self._log = world_dir.torchrun_log
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={world_size}",
            "--max-restarts=0",
            "--monitor-interval=0.05",
            "-m",
            "cpci.runner.launch.shim",
            str(world_dir.path),
        ]
        with open(self._log, "wb") as log:
            self._proc = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )

    def poll(self) -> bool:
        return self._proc.poll() is not None

    def kill(self) -> None:
        if self._proc.poll() is None:
            kill_tree(self._proc.pid)
            self._proc.wait()

    def ended(self) -> tuple[str, Path]:
        return f"torchrun exited with code {self._proc.returncode}", self._log


def torchrun_env(rank: int, world_size: int, port: int, run_id: str) -> dict[str, str]:
    """The variables torchrun's agent sets for a worker of a one-node world."""
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "GROUP_RANK": "0",
        "ROLE_RANK": str(rank),
        "ROLE_NAME": "default",
        "WORLD_SIZE": str(world_size),
        "LOCAL_WORLD_SIZE": str(world_size),
        "GROUP_WORLD_SIZE": "1",
        "ROLE_WORLD_SIZE": str(world_size),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_RUN_ID": run_id,
        "TORCHELASTIC_USE_AGENT_STORE": "True",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
    }
