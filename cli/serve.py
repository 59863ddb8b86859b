"""``ledger serve``: run the HTTP API (FastAPI on uvicorn), reading the ledger as ``ledger_reader``."""

from __future__ import annotations

import argparse
import os
import sys

from api.binding import TOKEN_ENV, AccessError, check_bind
from cli.exit_status import EXIT_USAGE
from cli.options import add_logging
from consumers.logs import configure_logging

__all__ = ["register", "run_serve"]

INSTALL_HINT = "ledger serve needs the api extra: pip install 'verification-ledger[api]'"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``ledger serve``."""
    p = subparsers.add_parser(
        "serve",
        description=f"Read-only HTTP API. Off the loopback interface a bearer token ({TOKEN_ENV}) is required.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=tcp_port, default=8080, help="port (default: 8080; 0 picks a free one)")
    add_logging(p, text_help="one plain line per record (the access log at --log-level info)")
    p.set_defaults(handler=run_serve)


def tcp_port(text: str) -> int:
    """A TCP port number, 0 to 65535 (argparse says ``invalid tcp_port value`` otherwise: exit 2)."""
    value = int(text)
    if not 0 <= value <= 65535:
        raise ValueError(text)
    return value


def _error(message: object) -> int:
    """Every refusal of ``serve`` is a usage or environment error (address, token, extra, database)."""
    print(f"ledger serve: {message}", file=sys.stderr)
    return EXIT_USAGE


def run_serve(args: argparse.Namespace) -> int:
    """Check the address and token, open the database as ledger_reader, and serve until stopped."""
    token = os.environ.get(TOKEN_ENV) or None
    try:
        check_bind(args.host, token)
    except AccessError as exc:
        return _error(exc)
    try:
        import uvicorn

        from api.app import create_app
        from api.db import DatabaseUnavailable, ReaderSetupError, reader_engine
    except ImportError as exc:
        return _error(f"{INSTALL_HINT} ({exc.name} is missing)")
    from devstack.database import open_database
    from ledger.errors import LedgerError
    from ledger.settings import get_settings

    settings = get_settings()
    configure_logging(args.log_level, log_format=args.log_format)
    try:
        with open_database(settings, migrate=False) as admin:
            url = admin.url.render_as_string(hide_password=False)
            engine = reader_engine(url)
            try:
                app = create_app(engine, token=token, max_body_bytes=settings.max_message_bytes)
                print(
                    f"ledger serve: http://{args.host}:{args.port} (as ledger_reader"
                    f"{', bearer token required' if token else ', loopback only'})",
                    file=sys.stderr,
                )
                try:
                    # log_config=None: uvicorn's records go through the handler configure_logging set
                    uvicorn.run(
                        app,
                        host=args.host,
                        port=args.port,
                        log_config=None,
                        log_level=args.log_level,
                        server_header=False,
                    )
                except SystemExit as exc:  # uvicorn exits (status 3) when it cannot bind or start
                    if exc.code in (0, None):
                        raise
                    return _error(f"could not serve on {args.host}:{args.port} (the log above says why)")
            finally:
                engine.dispose()
    except (ReaderSetupError, DatabaseUnavailable, LedgerError) as exc:
        return _error(exc)
    return 0
