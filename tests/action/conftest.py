"""A live result service for the report-mode tests (the one the upload tests use)."""

from tests.upload.conftest import service

__all__ = ["service"]
