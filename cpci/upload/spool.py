"""A disk spool for uploads the service could not take (down, 5xx), sent again later.

Each spooled upload is one JSON file holding the server URL and the envelope, named by the hash of
its body: spooling the same upload twice keeps one file, and the service's idempotent ingest makes
a resend after a lost answer harmless. Files are written atomically (temp file, fsync, rename), so a
crash never leaves a half file that looks complete. Credentials are never spooled: a flush gets
fresh ones (OIDC tokens expire within minutes).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from cpci.schema import RunEnvelope


def default_spool_dir() -> Path:
    """`$CPCI_SPOOL`, else `$XDG_CACHE_HOME/cpci/spool` (`~/.cache/cpci/spool`)."""
    if os.environ.get("CPCI_SPOOL"):
        return Path(os.environ["CPCI_SPOOL"])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "cpci" / "spool"


@dataclass(frozen=True)
class Spooled:
    path: Path
    server: str
    envelope: RunEnvelope


class Spool:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def put(self, server: str, envelope: RunEnvelope) -> Path:
        body = envelope.model_dump_json(by_alias=True)
        digest = hashlib.sha256(f"{server}\n{body}".encode()).hexdigest()[:32]
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"upload-{digest}.json"
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"server": server, "envelope": json.loads(body)}, fh)
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(path)
        return path

    def pending(self) -> list[Spooled]:
        """Spooled uploads, oldest first; an unreadable file is reported, never deleted."""
        if not self.directory.is_dir():
            return []
        out = []
        files = sorted(self.directory.glob("upload-*.json"), key=lambda p: p.stat().st_mtime)
        for path in files:
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                out.append(
                    Spooled(path, data["server"], RunEnvelope.model_validate(data["envelope"]))
                )
            except (OSError, ValueError, KeyError) as exc:
                raise SpoolError(
                    f"{path}: unreadable spooled upload ({exc}); move it away"
                ) from exc
        return out

    @staticmethod
    def done(item: Spooled) -> None:
        item.path.unlink(missing_ok=True)

    def reject(self, item: Spooled, reason: str) -> Path:
        """Move an upload the service refused for good out of the way, with the reason beside it."""
        rejected = self.directory / "rejected"
        rejected.mkdir(exist_ok=True)
        target = rejected / item.path.name
        item.path.replace(target)
        target.with_suffix(".reason.txt").write_text(reason + "\n", encoding="utf-8")
        return target


class SpoolError(RuntimeError):
    """A file in the spool cannot be read; it is left in place for a person to look at."""
