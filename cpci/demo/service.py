"""The demo's result service: a real `cpci serve` child process on a fresh SQLite database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from cpci.demo.history import REPOSITORY


class Service:
    """`cpci serve` on 127.0.0.1:`port`, its database and log in `workdir`; started at once, so
    it boots while the first suite runs (`wait_ready` before talking to it)."""

    def __init__(self, workdir: Path, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.database = workdir / "cpci.db"
        self.env = {
            **os.environ,
            "CPCI_DATABASE_URL": f"sqlite:///{self.database}",
            "CPCI_HOST": "127.0.0.1",
            "CPCI_PORT": str(port),
        }
        self.log = open(workdir / "service.log", "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cpci", "serve"],
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Poll `/healthz` until the child answers (it migrates the database first)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"cpci serve exited; see {self.log.name}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)  # a child process we do not control: no readiness signal to await
        raise RuntimeError(
            f"cpci serve did not answer on {self.url} within {timeout_s:g} s; see {self.log.name}"
            " (is the port taken? pass --port N)"
        )

    def create_token(self) -> str:
        """An upload token; branch-scoped, since the demo uploads main's history as well."""
        command = [sys.executable, "-m", "cpci", "token", "create", REPOSITORY, "--json"]
        command += ["--scope", "branch"]
        made = subprocess.run(command, env=self.env, capture_output=True, text=True, check=True)
        return str(json.loads(made.stdout)["token"])

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        self.log.close()
