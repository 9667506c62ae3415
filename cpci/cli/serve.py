"""`cpci serve`: run the result service with uvicorn (migrations applied first)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from cpci.cli.db import ServiceSettingsError, add_database_option, settings_from


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "serve",
        help="run the result service (settings from CPCI_* environment variables)",
        description="Example: CPCI_READ_ACCESS=token cpci serve --host 0.0.0.0 --port 8000",
    )
    parser.add_argument("--host", help="default: CPCI_HOST, else 127.0.0.1")
    parser.add_argument("--port", type=int, help="default: CPCI_PORT, else 8000")
    parser.add_argument("--no-migrate", action="store_true", help="do not apply migrations")
    add_database_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from cpci.server import create_app
    from cpci.server.core import migrate
    from cpci.server.core.db import create_db_engine

    try:
        settings = settings_from(args, host=args.host, port=args.port)
    except ServiceSettingsError as exc:
        print(f"cpci serve: {exc}", file=sys.stderr)
        return 2
    engine = create_db_engine(settings.database_url)
    if settings.migrate_on_start and not args.no_migrate:
        migrate.upgrade(engine)
    else:
        migrate.require_current(engine)
    app = create_app(settings, engine=engine)
    # uvicorn configures its own loggers only: the service's (start-up priming, the webhook
    # worker) would go unheard without a handler on the root logger.
    logging.basicConfig(level=logging.INFO, format="%(levelname)s:     %(name)s: %(message)s")
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="info")
    return 0
