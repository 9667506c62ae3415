"""`cpci db upgrade|current`: apply or show the result service's database migrations.

Also the service settings every service command (`db`, `token`, `serve`) starts from: the
environment's `CPCI_*` variables under the command's options, refused in one line naming each
bad setting rather than with pydantic's traceback.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError

    from cpci.server.core.config import Settings

#: Options that stand for a setting, so an error names what the user typed.
_FLAGS = {"database_url": "--database-url", "host": "--host", "port": "--port"}


class ServiceSettingsError(ValueError):
    """The service settings do not validate; the message names each bad one and its value."""


def add_database_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database-url",
        help="sqlite:///PATH or postgresql://USER@HOST/DB (default: CPCI_DATABASE_URL, "
        "else sqlite:///cpci.db)",
    )


def settings_from(args: argparse.Namespace, **overrides: Any) -> Settings:
    """Settings from the environment, with `--database-url` and `overrides` (those not None)
    taking precedence. Raises `ServiceSettingsError` naming every setting that is wrong."""
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from cpci.server.core.config import Settings

    given = {"database_url": args.database_url, **overrides}
    given = {name: value for name, value in given.items() if value is not None}
    try:
        return Settings(**given)
    except ValidationError as exc:
        raise ServiceSettingsError(_validation_problems(exc, given)) from None
    except SettingsError as exc:  # a JSON-typed variable that is not JSON
        field = re.search(r'field "(\w+)"', str(exc))
        name = f"CPCI_{field.group(1).upper()}" if field else "a CPCI_* variable"
        raise ServiceSettingsError(
            f"{name} is not valid JSON ({exc.__cause__ or exc}): it takes a JSON list, "
            """e.g. '["one", "two"]'"""
        ) from None


def _validation_problems(exc: ValidationError, given: dict[str, Any]) -> str:
    problems = []
    for error in exc.errors():
        message = error["msg"].removeprefix("Value error, ")
        if not error["loc"]:  # a rule across settings: its message names them
            problems.append(message)
            continue
        field = str(error["loc"][0])
        where = _FLAGS[field] if field in given else f"CPCI_{field.upper()}"
        value = f"={error['input']!r}" if len(error["loc"]) == 1 else ""
        problems.append(f"{where}{value}: {message}")
    return "; ".join(problems)


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

    try:
        settings = settings_from(args)
    except ServiceSettingsError as exc:
        print(f"cpci db: {exc}", file=sys.stderr)
        return 2
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
