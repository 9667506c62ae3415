"""Builders for upload bodies, so each test states only what matters to it."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

REPO = "acme/attn"
BASE = "a" * 40
HEAD = "b" * 40


def sha(n: int) -> str:
    """A distinct, valid commit sha per number."""
    return f"{n:040x}"


def record(name: str, outcome: str = "passed", **fields: Any) -> dict[str, Any]:
    message = fields.pop("message", None)
    body: dict[str, Any] = {
        "schema": "cpci.result/1",
        "nodeid": f"tests/test_cp.py::test_attn[{name}]",
        "world_size": 2,
        "outcome": outcome,
        "duration_s": 1.0,
    }
    if message is not None:
        body["rank_errors"] = [{"rank": 0, "phase": "call", "message": message}]
    body.update(fields)
    return body


def config(name: str) -> str:
    return f"tests/test_cp.py::test_attn[{name}]@2"


def envelope(results: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "schema": "cpci.run/1",
        "repository": REPO,
        "commit": BASE,
        "branch": "main",
        "ci_run_id": "100",
        "ci_attempt": 1,
        "shard_index": 0,
        "shard_total": 1,
        "environment": {"torch": "2.4.0", "cuda": "12.4", "gpu": "H100", "backend": "nccl"},
        "results": results,
    }
    body.update(fields)
    return body


def upload(client: TestClient, body: dict[str, Any], expect: int = 201) -> dict[str, Any]:
    response = client.post("/api/v1/uploads", json=body)
    assert response.status_code == expect, response.text
    data: dict[str, Any] = response.json()
    return data
