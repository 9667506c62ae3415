"""Checking that a webhook delivery came from GitHub: HMAC-SHA256 of the raw body.

GitHub signs each delivery with the webhook secret and sends `X-Hub-Signature-256:
sha256=<hex>`. The comparison is constant-time, so the signature cannot be guessed byte by byte.
"""

from __future__ import annotations

import hashlib
import hmac


def sign(secret: str, body: bytes) -> str:
    """The header value GitHub would send for `body`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signature_ok(secret: str, body: bytes, header: str | None) -> bool:
    """Whether `header` is GitHub's signature of `body` under `secret`."""
    if not header or not header.startswith("sha256="):
        return False
    return hmac.compare_digest(sign(secret, body).encode(), header.strip().encode())
