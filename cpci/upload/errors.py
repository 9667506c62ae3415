"""The uploader's one exception tree: every failure it can explain is an `UploadError`.

Each subclass carries the exit code `cpci upload` ends with, so the command line maps them in one
`except` and a caller of the library catches one base. The messages already say what to do; the
CLI prints them as they are.
"""

from __future__ import annotations

from typing import ClassVar

#: Statuses worth another try: the service (or a proxy in front of it) is overloaded or restarting.
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class UploadError(RuntimeError):
    """Anything the uploader cannot do; `exit_code` is what `cpci upload` exits with."""

    exit_code: ClassVar[int] = 1


class EnvelopeError(UploadError, ValueError):
    """A field is missing or wrong; the message names the flag and the env var."""

    exit_code = 2


class JUnitError(UploadError, ValueError):
    """A file that is not JUnit XML; the message names the file and what is wrong."""


class CredentialsError(UploadError):
    """No way to authenticate; the message says what to configure."""

    exit_code = 2


class SpoolError(UploadError):
    """The spool could not hold an upload the service did not take (disk full, no permission)."""


class UploadFailed(UploadError):
    """The service refused a request or could not be reached; `status` 0 means no answer."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status

    @property
    def retryable(self) -> bool:
        """A retry may get through: no answer, or a status that says "later"."""
        return self.status == 0 or self.status in RETRYABLE_STATUSES


class UploadRefused(UploadFailed):
    """The service refused this upload for good (no retry can fix it); the message says what it
    answered, that nothing was stored, and where the upload is kept to be sent again."""
