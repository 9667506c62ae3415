"""Uploading results: JUnit conversion, the run envelope, and sending it to the service."""

from cpci.upload.envelope import EnvelopeError, RunFields, build_envelope
from cpci.upload.junit import JUnitError, read_junit
from cpci.upload.send import UploadFailed, send_envelope

__all__ = [
    "EnvelopeError",
    "JUnitError",
    "RunFields",
    "UploadFailed",
    "build_envelope",
    "read_junit",
    "send_envelope",
]
