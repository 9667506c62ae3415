"""`cpci db upgrade|current`: apply or show the result service's database migrations."""

from __future__ import annotations

import argparse
from typing import Any


def add_database_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database-url",
        help="sqlite:///PATH or postgresql://USER@HOST/DB (default: CPCI_DATABASE_URL, "
        "else sqlite:///cpci.db)",
    )


def settings_from(args: argparse.Namespace) -> Any:
    """Settings from the environment, with command-line options taking precedence."""
    from cpci.server.core.config import Settings

    overrides = {"database_url": args.database_url} if args.database_url else {}
    return Settings(**overrides)


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "db",
        help="apply or show the result service's database migrations",
        description="Example: cpci db upgrade --database-url postgresql://cpci@db/cpci",
    )
    parser.add_argument("action", choices=["upgrade", "current"])
    parser.add_argument("--revision", default="head", help="upgrade to this revision")
    add_database_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cpci.server.core import migrate
    from cpci.server.core.db import create_db_engine

    settings = settings_from(args)
    engine = create_db_engine(settings.database_url)
    try:
        if args.action == "upgrade":
            migrate.upgrade(engine, args.revision)
        current = migrate.current_revision(engine)
        head = migrate.head_revision()
        state = "up to date" if current == head else f"behind: run `cpci db upgrade` for {head}"
        print(
            f"{engine.url.render_as_string(hide_password=True)}: at {current or 'none'} ({state})"
        )
    finally:
        engine.dispose()
    return 0
