"""``ledger migrate``: Alembic ``upgrade head`` on the configured (or embedded) database."""

from __future__ import annotations

import argparse
import sys

from alembic.util.exc import CommandError

from cli.exit_status import EXIT_USAGE
from cli.options import add_database_url
from devstack.database import open_database
from ledger.errors import LedgerError
from ledger.migration import current_revision, downgrade, head_revision, upgrade
from ledger.settings import get_settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``migrate`` command."""
    parser = subparsers.add_parser(
        "migrate",
        description=(
            "Run the Alembic migrations on LEDGER_DATABASE_URL (or --url). Without a URL, the embedded "
            "PostgreSQL in <state_dir>/postgres is used (started and stopped around the command unless "
            "`ledger up` is running). Also creates the cluster roles ledger_owner, ledger_writer and "
            "ledger_reader if they are missing."
        ),
    )
    add_database_url(parser)
    parser.add_argument("--revision", default="head", help="target revision to upgrade to (default: head)")
    parser.add_argument("--downgrade", metavar="REVISION", default=None, help="downgrade to REVISION instead")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Migrate and report the revision reached."""
    settings = get_settings()
    if args.database_url:
        settings = settings.model_copy(update={"database_url": args.database_url})
    try:
        with open_database(settings, migrate=False) as engine:
            before = current_revision(engine)
            if args.downgrade:
                downgrade(engine, args.downgrade)
            else:
                upgrade(engine, args.revision)
            after = current_revision(engine)
            where = engine.url.render_as_string(hide_password=True)
    except (LedgerError, CommandError, ValueError) as exc:
        print(f"ledger migrate: {exc}", file=sys.stderr)
        return EXIT_USAGE  # no database, one this login cannot migrate, a bad URL or revision
    print(f"{where}: {before or 'empty'} -> {after or 'empty'} (head {head_revision()})")
    return 0
