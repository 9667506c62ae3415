"""The result service: ingest of `cpci.run/1` uploads, history, flakiness and PR verdicts."""

from cpci.server.app import create_app
from cpci.server.core.config import Settings

__all__ = ["Settings", "create_app"]
