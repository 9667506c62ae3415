"""`cpci db upgrade|current|compact`: apply or show the result service's database migrations,
or roll raw results older than the retention up into daily aggregates (`crud.compact`).

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
    from sqlalchemy.engine import Engine

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
        help="apply or show the result service's database migrations; compact old results",
        description="Example: cpci db upgrade --database-url postgresql://cpci@db/cpci; "
        "cpci db compact --older-than 90 --dry-run",
    )
    parser.add_argument("action", choices=["upgrade", "current", "compact"])
    parser.add_argument("--revision", default="head", help="upgrade to this revision")
    parser.add_argument(
        "--older-than",
        type=float,
        metavar="DAYS",
        help="compact: roll up the results of runs older than DAYS days "
        "(default: CPCI_RAW_RETENTION_DAYS)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="compact: count what would be rolled up, change nothing",
    )
    parser.add_argument(
        "--batch", type=int, default=None, help="compact: about this many results per transaction"
    )
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
        if args.action == "compact":
            return _compact(args, settings, engine)
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


def _compact(args: argparse.Namespace, settings: Settings, engine: Engine) -> int:
    """Roll up and delete the raw results older than the cut, a progress line per batch."""
    from datetime import timedelta

    from cpci.server.core import migrate
    from cpci.server.crud.compact import BATCH_RESULTS, CompactProgress, compact
    from cpci.server.models import utcnow

    days = args.older_than if args.older_than is not None else settings.raw_retention_days
    if days is None or days <= 0:
        print(
            "cpci db compact: say how old a result must be: --older-than DAYS (> 0), or set "
            "CPCI_RAW_RETENTION_DAYS",
            file=sys.stderr,
        )
        return 2
    try:
        migrate.require_current(engine)
    except RuntimeError as exc:
        print(f"cpci db compact: {exc}", file=sys.stderr)
        return 2
    before = utcnow() - timedelta(days=days)
    verb = "would roll up" if args.dry_run else "rolled up"

    def line(p: CompactProgress) -> str:
        return (
            f"{verb} {p.results} results of {p.runs} runs before {before:%Y-%m-%d %H:%M} UTC "
            f"in {p.batches} batch(es), {p.rollups} daily rows written, "
            f"{p.results_per_s:,.0f} results/s"
        )

    done = compact(
        engine=engine,
        before=before,
        batch_results=args.batch or BATCH_RESULTS,
        dry_run=args.dry_run,
        on_batch=lambda p: print(line(p), file=sys.stderr, flush=True),
    )
    print(line(done))
    return 0
