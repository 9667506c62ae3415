"""The live result service for the command line's tests (the one the upload tests use)."""

from tests.upload.support import service

__all__ = ["service"]
