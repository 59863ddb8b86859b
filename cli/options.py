"""Options every ``ledger`` command spells the same way: ``--database-url`` and ``--format``."""

from __future__ import annotations

import argparse


def add_database_url(parser: argparse.ArgumentParser, default_help: str = "LEDGER_DATABASE_URL") -> None:
    """``--database-url URL`` (``args.database_url``; None when not given)."""
    parser.add_argument("--database-url", default=None, help=f"PostgreSQL URL (default: {default_help})")


def add_format(parser: argparse.ArgumentParser, default: str = "text", json_help: str = "") -> None:
    """``--format text|json`` (``args.format``)."""
    more = f"; json: {json_help}" if json_help else ""
    parser.add_argument(
        "--format", choices=("text", "json"), default=default, help=f"output format (default {default}{more})"
    )
