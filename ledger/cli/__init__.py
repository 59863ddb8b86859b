"""The ``ledger`` command line.

Each command lives in its own module exposing ``register(subparsers)``; the module adds a parser
and sets ``handler=`` to a function ``(argparse.Namespace) -> int``. ``ledger`` never imports
``consumers``: the console script is ``consumers.cli:main``, which adds the Kafka commands
(publish, consume, demo, up/down/status) to the ones registered here.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib import import_module

from ledger.embedded_extra import EmbeddedExtraMissing

Registrar = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]

EXIT_MISSING_EXTRA = 2  # the command needs an optional extra that is not installed

LEDGER_COMMAND_MODULES: tuple[str, ...] = (
    # one module per command group; each defines register(subparsers)
    "ledger.cli.audit",
    "ledger.cli.migrate",
    "ledger.cli.replay",
    "ledger.cli.reason",
    "ledger.cli.translog",
)


def _registrars(module_names: Sequence[str]) -> list[Registrar]:
    return [import_module(name).register for name in module_names]


def build_parser(extra: Sequence[Registrar] = ()) -> argparse.ArgumentParser:
    """The full argument parser: ledger commands plus any ``extra`` registrars."""
    parser = argparse.ArgumentParser(
        prog="ledger",
        description="Verification ledger for Cournot proof-of-reasoning bundles.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in [*_registrars(LEDGER_COMMAND_MODULES), *extra]:
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None, extra: Sequence[Registrar] = ()) -> int:
    """Parse ``argv`` and run the chosen command; returns the process exit code."""
    parser = build_parser(extra)
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return int(handler(args))
    except EmbeddedExtraMissing as exc:  # one line naming the extra, not a traceback
        print(f"ledger {args.command} {exc}", file=sys.stderr)
        return EXIT_MISSING_EXTRA
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
