"""What the UI routes and their JSON twins share: the app's digest cache."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from cpci.server.ui.digests import DigestCache


def get_digests(request: Request) -> DigestCache:
    cache: DigestCache = request.app.state.ui_digests
    return cache


DigestsDep = Annotated[DigestCache, Depends(get_digests)]
