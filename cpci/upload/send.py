"""Sending an envelope to the result service: the one place retries and a spool will go."""

from __future__ import annotations

from typing import Any

import httpx

from cpci.schema import RunEnvelope

UPLOAD_PATH = "/api/v1/uploads"


class UploadFailed(RuntimeError):
    """The service refused the upload or could not be reached; `status` 0 means no answer."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def send_envelope(
    server: str,
    token: str,
    envelope: RunEnvelope,
    *,
    transport: httpx.BaseTransport | None = None,
    timeout_s: float = 60.0,
) -> dict[str, Any]:
    """POST the envelope; returns the service's receipt (stored or duplicate)."""
    body = envelope.model_dump_json(by_alias=True)
    url = server.rstrip("/") + UPLOAD_PATH
    try:
        with httpx.Client(transport=transport, timeout=timeout_s) as http:
            response = http.post(
                url,
                content=body,
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
    except httpx.HTTPError as exc:
        raise UploadFailed(f"no answer from {url} ({exc}): check --server / CPCI_SERVER") from exc
    if response.status_code in (200, 201):
        receipt: dict[str, Any] = response.json()
        return receipt
    try:
        detail = response.json().get("detail", response.text)
    except ValueError:
        detail = response.text[:500]
    raise UploadFailed(f"{url} answered {response.status_code}: {detail}", response.status_code)
