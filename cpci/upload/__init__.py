"""Uploading results: JUnit conversion, the run envelope, and sending it to the service.

Every failure the uploader can explain is an `UploadError` (see `cpci.upload.errors`); its
`exit_code` is what `cpci upload` ends with.
"""

from cpci.upload.envelope import RunFields, build_envelope
from cpci.upload.errors import (
    CredentialsError,
    EnvelopeError,
    JUnitError,
    SpoolError,
    UploadError,
    UploadFailed,
    UploadRefused,
)
from cpci.upload.junit import read_junit
from cpci.upload.retry import Backoff
from cpci.upload.send import deliver, flush
from cpci.upload.service_client import ServiceClient
from cpci.upload.settings import UploadSettings, UploadSettingsError
from cpci.upload.shard_upload import ShardUpload, upload_shard

__all__ = [
    "Backoff",
    "CredentialsError",
    "EnvelopeError",
    "JUnitError",
    "RunFields",
    "ServiceClient",
    "ShardUpload",
    "SpoolError",
    "UploadError",
    "UploadFailed",
    "UploadRefused",
    "UploadSettings",
    "UploadSettingsError",
    "build_envelope",
    "deliver",
    "flush",
    "read_junit",
    "upload_shard",
]
