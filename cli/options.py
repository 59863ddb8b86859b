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


def add_logging(parser: argparse.ArgumentParser, text_help: str = "plain lines") -> None:
    """``--log-level`` and ``--log-format auto|json|text`` (``args.log_level``, ``args.log_format``).

    The command passes both to :func:`consumers.logs.configure_logging`, the one logging setup.
    """
    from consumers.logs import LOG_FORMATS, LOG_LEVELS

    parser.add_argument(
        "--log-level",
        type=str.lower,  # INFO works as well as info
        choices=LOG_LEVELS,
        default="info",
        help="the least severe records shown (default info)",
    )
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="auto",
        help=f"json: one JSON object per line; text: {text_help}; auto (default): text when stderr is a "
        "terminal, else json",
    )
