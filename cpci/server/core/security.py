"""Upload tokens: random, shown once, stored only as a SHA-256.

A token is 32 random bytes, so a plain hash is as strong as a slow one (there is nothing to
brute-force) and lookup stays one indexed equality.
"""

from __future__ import annotations

import hashlib
import secrets

TOKEN_PREFIX = "cpci_"


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def looks_like_upload_token(token: str) -> bool:
    return token.startswith(TOKEN_PREFIX)
