"""`cpci token create|list|revoke`: per-repository upload tokens for the result service."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from cpci.cli.db import ServiceSettingsError, add_database_option, settings_from

REPOSITORY = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")  # as cpci.schema.RunEnvelope.repository


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "token",
        help="create, list or revoke upload tokens",
        description="Example: cpci token create my-org/my-repo --name gpu-runners "
        "(the token is printed once; only its hash is stored)",
    )
    parser.add_argument("action", choices=["create", "list", "revoke"])
    parser.add_argument("target", nargs="?", help="OWNER/REPO (create, list) or a token id")
    parser.add_argument("--name", default="", help="what the token is for")
    parser.add_argument(
        "--scope",
        choices=("branch", "pr"),
        default="pr",
        help="pr (the default, the safer one): may upload pull-request runs only; branch: may "
        "also upload branch history (the base every PR is compared with) and commit ancestry. "
        "Give PR jobs a pr token and only trusted branch jobs a branch token. Tokens made "
        "before scopes existed have scope branch",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    add_database_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sqlmodel import Session

    from cpci.server.core.db import create_db_engine
    from cpci.server.core.migrate import current_revision, require_current, upgrade
    from cpci.server.crud import tokens

    if args.action == "create" and not REPOSITORY.fullmatch(args.target or ""):
        print(f"cpci token create needs OWNER/REPO, got {args.target or ''!r}", file=sys.stderr)
        return 2
    try:
        settings = settings_from(args)
    except ServiceSettingsError as exc:
        print(f"cpci token: {exc}", file=sys.stderr)
        return 2
    url = settings.database_url
    file = sqlite_file(url)
    new_file = file is not None and not file.exists()
    if new_file and args.action != "create":
        print(
            f"cpci token: there is no database at {file}: `cpci token create` or "
            "`cpci db upgrade` makes one (check --database-url / CPCI_DATABASE_URL)",
            file=sys.stderr,
        )
        return 1
    engine = create_db_engine(url)
    try:
        if args.action == "create" and current_revision(engine) is None:
            upgrade(engine)
            print(
                f"cpci token: the database {engine.url.render_as_string(hide_password=True)} "
                "was empty: applied its migrations first (as `cpci db upgrade` does)",
                file=sys.stderr,
            )
        require_current(engine)
        with Session(engine) as session:
            if args.action == "create":
                return _create(session, args, tokens)
            if args.action == "list":
                listed = tokens.list_tokens(session=session, repository=args.target)
                for t in listed:
                    state = f"revoked {t.revoked_at:%Y-%m-%d}" if t.revoked_at else "active"
                    print(f"{t.id}\t{t.repository}\t{t.name or '-'}\t{state}\tscope={t.scope}")
                return 0
            if not (args.target or "").isdigit():
                print("cpci token revoke needs a token id (see `cpci token list`)", file=sys.stderr)
                return 2
            revoked = tokens.revoke_token(session=session, token_id=int(args.target))
            session.commit()
            print(f"token {args.target} {'revoked' if revoked else 'not found or already revoked'}")
            return 0 if revoked else 1
    except Exception as exc:
        if new_file and file is not None:  # never leave an empty database behind a failure
            engine.dispose()
            for suffix in ("", *SQLITE_SIDECARS):
                file.with_name(file.name + suffix).unlink(missing_ok=True)
        if not isinstance(exc, RuntimeError):
            raise
        print(f"cpci token: {exc}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()


#: The files SQLite keeps beside a database in WAL mode.
SQLITE_SIDECARS = ("-wal", "-shm", "-journal")


def sqlite_file(url: str) -> Path | None:
    """The file of a sqlite:///PATH URL (None: another engine, or an in-memory database)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return None
    if parsed.database == ":memory:":
        return None
    return Path(parsed.database)


def _create(session: Any, args: argparse.Namespace, tokens: Any) -> int:
    repository = args.target
    created = tokens.create_token(
        session=session, repository=repository, name=args.name, scope=args.scope
    )
    session.commit()
    if args.json:
        made = {"id": created.public.id, "repository": repository, "scope": args.scope}
        print(json.dumps({**made, "token": created.token}))
    else:
        print(created.token)
        may = "PR runs only" if args.scope == "pr" else "branch history and PR runs"
        print(
            f"token {created.public.id} for {repository}, scope {args.scope} ({may}): store it "
            "as a CI secret now, it is not shown again",
            file=sys.stderr,
        )
    return 0
