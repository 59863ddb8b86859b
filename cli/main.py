"""Console entry point: the ledger commands plus the Kafka-facing ones."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from importlib import import_module

from cli.parser import main as ledger_main

CONSUMER_COMMAND_MODULES: tuple[str, ...] = (
    # one module per command group; each defines register(subparsers)
    "cli.publish",
    "cli.consume",
    "cli.health",
    "cli.demo",
    "cli.stack",
    "cli.serve",  # ledger serve (the api package sits above consumers)
)
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # what a shell reports for a tool killed by SIGPIPE


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ledger`` command line."""
    extra = [import_module(name).register for name in CONSUMER_COMMAND_MODULES]
    try:
        code = ledger_main(argv, extra)
        sys.stdout.flush()  # a closed pipe shows up here at the latest, not at interpreter exit
    except BrokenPipeError:
        # The reader went away (`ledger publish ... | head`): end quietly, as Unix tools do. Nothing
        # is lost by it: whatever the command did (records sent, entries appended) is already done,
        # only the rest of its report has nowhere to go. stdout now points at /dev/null so that the
        # interpreter's final flush cannot raise the same error again as a traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE
    return code


if __name__ == "__main__":
    sys.exit(main())
