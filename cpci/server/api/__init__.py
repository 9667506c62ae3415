"""The HTTP API: version 1 under `/api/v1`, operations endpoints at the root."""

from __future__ import annotations

from fastapi import APIRouter

from cpci.server.api.routes import culprits, ops, quarantines, repos, uploads
from cpci.urls import API_PREFIX

api_router = APIRouter(prefix=API_PREFIX)
api_router.include_router(uploads.router)
api_router.include_router(repos.router)
api_router.include_router(quarantines.router)
api_router.include_router(culprits.router)

ops_router = ops.router

__all__ = ["api_router", "ops_router"]
