"""Console entry point: the ledger commands plus the Kafka-facing ones."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib import import_module

from ledger.cli import main as ledger_main

CONSUMER_COMMAND_MODULES: tuple[str, ...] = (
    # one module per command group; each defines register(subparsers)
    "consumers.commands.publish",
    "consumers.commands.consume",
    "consumers.commands.health",
    "consumers.cli_demo",
    "consumers.cli_stack",
    "api.cli",  # ledger serve (the api package sits above consumers)
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ledger`` command line."""
    extra = [import_module(name).register for name in CONSUMER_COMMAND_MODULES]
    return ledger_main(argv, extra)


if __name__ == "__main__":
    sys.exit(main())
