"""The live result service for the uploader's tests (see `tests.upload.support`)."""

from tests.upload.support import service

__all__ = ["service"]
