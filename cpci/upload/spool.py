"""A disk spool for uploads the service could not take (down, 5xx), sent again later.

Each spooled upload is one JSON file holding the envelope and what it is bound to: the server
URL and the repository it was made for (and, in GitHub Actions, its CI run). A flush sends an
item only to its own server, only with credentials for its own repository, and in Actions only
from a job of its own run: a file planted in a shared spool by earlier (e.g. fork) code can
neither draw the next trusted job's token to another server nor be sent under that job's name.
Items bound elsewhere are left in place, untouched.

Files are written atomically (temp file, fsync, rename) and named by the hash of their body, so
spooling the same upload twice keeps one file. Sending an item first claims it by renaming it
(atomic on one file system): two concurrent flushes never send the same item, and a claim left by
a process that died is released by the next flush. A file that cannot be read (corrupt, not a
regular file, a symlink) is moved to `bad/` with the reason beside it; it never blocks the upload
at hand, and no file of the spool makes a flush raise: what cannot be read, claimed, moved or
removed is left where it is, with a note. Credentials are never spooled: a
flush gets fresh ones (OIDC tokens expire within minutes).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from cpci.pids import is_alive
from cpci.schema import RunEnvelope
from cpci.upload.errors import SpoolError

CLAIM = ".claimed-"


def default_spool_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """`$CPCI_SPOOL`; in GitHub Actions `$RUNNER_TEMP/cpci-spool` (private to the job: a
    self-hosted runner's home is shared by every job it runs); else `~/.cache/cpci/spool`."""
    if environ.get("CPCI_SPOOL"):
        return Path(environ["CPCI_SPOOL"])
    if environ.get("RUNNER_TEMP"):
        return Path(environ["RUNNER_TEMP"]) / "cpci-spool"
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "cpci" / "spool"


def normalise_server(server: str) -> str:
    """One spelling per server URL, so a trailing slash does not unbind an item."""
    return server.strip().rstrip("/")


@dataclass(frozen=True)
class Binding:
    """Where an upload may go: its server, its repository, and in Actions its CI run."""

    server: str
    repository: str
    ci_run_id: str | None = None

    @classmethod
    def for_job(cls, server: str, repository: str, environ: Mapping[str, str]) -> Binding:
        """This job's binding: in GitHub Actions a job vouches only for its own run's items."""
        in_actions = environ.get("GITHUB_ACTIONS") == "true"
        return cls(server, repository, environ.get("GITHUB_RUN_ID") if in_actions else None)

    def refuses(self, item: Binding) -> str | None:
        """Why an item bound to `item` may not be flushed by this job (None: it may)."""
        if normalise_server(item.server) != normalise_server(self.server):
            return f"it is for {item.server}, this upload goes to {self.server}"
        if item.repository != self.repository:
            return f"it is for {item.repository}, these credentials are for {self.repository}"
        if self.ci_run_id is not None and item.ci_run_id != self.ci_run_id:
            return f"it was spooled by CI run {item.ci_run_id}, this is run {self.ci_run_id}"
        return None


@dataclass(frozen=True)
class Spooled:
    path: Path
    binding: Binding
    envelope: RunEnvelope

    @property
    def server(self) -> str:
        return self.binding.server


@dataclass
class Scan:
    """What the spool holds: readable items oldest first, and a note per file that was not
    (set aside as unreadable, or left where it is when even that failed)."""

    items: list[Spooled] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # one line per file set aside or left


class Spool:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def put(self, binding: Binding | str, envelope: RunEnvelope) -> Path:
        """Spool `envelope` for `binding` (a bare server URL binds to its repository)."""
        if isinstance(binding, str):
            binding = Binding(binding, envelope.repository)
        body = envelope.model_dump_json(by_alias=True)
        server = normalise_server(binding.server)
        digest = hashlib.sha256(f"{server}\n{body}".encode()).hexdigest()[:32]
        path = self.directory / f"upload-{digest}.json"
        tmp = self.directory / f".{path.name}.{os.getpid()}.tmp"
        data = {
            "server": server,
            "repository": binding.repository,
            "ci_run_id": binding.ci_run_id,
            "envelope": json.loads(body),
        }
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh)
                fh.flush()
                os.fsync(fh.fileno())
            tmp.replace(path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise SpoolError(
                f"cannot spool the upload in {self.directory} ({exc.strerror or exc}): it was "
                "not sent and is not kept; the results file still has it. Free the disk or pass "
                "--spool DIR (or CPCI_SPOOL), then upload again"
            ) from exc
        return path

    def scan(self) -> Scan:
        """Spooled uploads, oldest first. Never raises: an unreadable file is moved to `bad/`
        (never deleted), and what cannot be read or moved at all is a note."""
        scan = Scan()
        try:
            if not self.directory.is_dir():
                return scan
            scan.notes += self._release_abandoned_claims()
            paths = list(self.directory.glob("upload-*.json"))
        except OSError as exc:
            scan.notes.append(
                f"cannot read the spool {self.directory} ({exc.strerror or exc}): the uploads "
                "in it wait until it can be read"
            )
            return scan
        dated = []
        for path in paths:
            try:
                dated.append((path.lstat().st_mtime, path))
            except FileNotFoundError:
                continue  # claimed by a concurrent flush meanwhile
            except OSError as exc:
                scan.notes.append(self._set_aside(path, "bad", f"unreadable: {exc}"))
        for _, path in sorted(dated):
            try:
                scan.items.append(_read(path))
            except FileNotFoundError:
                continue
            except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
                scan.notes.append(self._set_aside(path, "bad", f"unreadable: {exc}"))
        return scan

    def pending(self) -> list[Spooled]:
        return self.scan().items

    def claim(self, item: Spooled) -> Spooled | None:
        """Take the item for sending; None when a concurrent flush already took it. Raises
        OSError when it cannot be renamed (the caller leaves it and says so)."""
        claimed = item.path.with_name(f"{item.path.name}{CLAIM}{os.getpid()}")
        try:
            item.path.rename(claimed)
        except FileNotFoundError:
            return None
        return Spooled(claimed, item.binding, item.envelope)

    @staticmethod
    def release(claimed: Spooled) -> None:
        """Put a claimed item back (it could not be sent now). Raises OSError when it cannot
        be renamed back: the claim is then released by the first flush after this process."""
        claimed.path.rename(_unclaimed(claimed.path))

    @staticmethod
    def done(item: Spooled) -> None:
        """Remove a sent item. Raises OSError when it cannot: a later flush sends it again,
        which the service answers `duplicate`."""
        item.path.unlink(missing_ok=True)

    def reject(self, item: Spooled, reason: str) -> str:
        """Move an upload the service refused for good out of the way, with the reason beside
        it; returns where it went (or why it could not be moved)."""
        return self._set_aside(item.path, "rejected", reason)

    def _set_aside(self, path: Path, folder: str, reason: str) -> str:
        """Move `path` to `folder/` with its reason beside it; never raises. Returns one line:
        where it went, or why it stays where it is."""
        target = self.directory / folder / _unclaimed(path).name
        try:
            target.parent.mkdir(exist_ok=True, mode=0o700)
            path.replace(target)
        except FileNotFoundError:
            return f"{path} is gone"
        except OSError as exc:
            return (
                f"left {path} where it is ({reason}): it cannot be moved to {target.parent} "
                f"({exc.strerror or exc})"
            )
        try:
            target.with_suffix(".reason.txt").write_text(reason + "\n", encoding="utf-8")
        except OSError as exc:
            return f"set aside {target}: {reason} (no reason file beside it: {exc})"
        return f"set aside {target}: {reason}"

    def _release_abandoned_claims(self) -> list[str]:
        notes = []
        for path in self.directory.glob(f"upload-*.json{CLAIM}*"):
            pid = path.name.rsplit(CLAIM, 1)[1]
            if pid.isdigit() and not is_alive(int(pid)):
                try:
                    path.rename(_unclaimed(path))
                except FileNotFoundError:
                    pass  # another flush released it first
                except OSError as exc:
                    notes.append(f"cannot release {path.name}, claimed by a process gone: {exc}")
        return notes


def _read(path: Path) -> Spooled:
    data = json.loads(_read_regular_file(path).decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    try:
        envelope = RunEnvelope.model_validate(data["envelope"])
    except ValidationError as exc:
        raise ValueError(f"not a cpci.run/1 envelope ({exc.error_count()} error(s))") from None
    if not isinstance(data["server"], str):
        raise ValueError("no server URL")
    run = data.get("ci_run_id")
    repository = data.get("repository", envelope.repository)
    if repository != envelope.repository:
        raise ValueError(f"bound to {repository} but its envelope is for {envelope.repository}")
    return Spooled(path, Binding(data["server"], repository, str(run) if run else None), envelope)


def _read_regular_file(path: Path) -> bytes:
    """The bytes of `path` if it is a regular file: a symlink, a FIFO (whose reading would never
    end) or a device planted under a spool name is refused without being read."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        return fh.read()


def _unclaimed(path: Path) -> Path:
    return path.with_name(path.name.split(CLAIM, 1)[0])
