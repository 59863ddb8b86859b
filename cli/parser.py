"""The ``ledger`` argument parser, built from :mod:`cli.commands` and importing only what runs.

``ledger --help`` lists the commands grouped by journey from the table alone; ``ledger NAME ...``
imports the one module that registers ``NAME``. An unknown name imports every module, so that
argparse's error lists every choice.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from importlib import import_module

from cli.commands import COMMANDS, GROUPS, MODULES, Command

EPILOG_TAIL = (
    "Query the ledger with SQL: the views live in schema ledger (`ledger up` prints the psql line).\n"
    "Run `ledger COMMAND --help` for the options of one command.\n\n"
    "Exit status: 0 ok; 1 the thing checked failed (a divergence, tampering, invalid input, a ledger\n"
    "or source log that cannot be trusted; for health and status, a service down); 2 a usage or\n"
    "environment error (bad options, a missing or unreadable file, a missing extra, no signing key,\n"
    "no ledger database or broker reachable, a schema behind its code). 130: interrupted; 141: the\n"
    "output pipe closed."
)


def grouped_listing() -> str:
    """The command list of ``ledger --help``, grouped by journey."""
    width = max(len(command.name) for command in COMMANDS) + 2
    blocks = []
    for group in GROUPS:
        lines = [f"  {c.name.ljust(width)}{c.summary}" for c in COMMANDS if c.group == group]
        blocks.append(f"{group}:\n" + "\n".join(lines))
    return "\n\n".join([*blocks, EPILOG_TAIL])


def build_parser(
    commands: Iterable[Command] | None = None,
) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction[argparse.ArgumentParser]]:
    """The top-level parser and its sub-command action, with the modules of ``commands`` registered.

    ``None`` registers every command (tests and tools that walk the command line).
    """
    parser = argparse.ArgumentParser(
        prog="ledger",
        usage="ledger [-h] COMMAND ...",
        description="Verification ledger for Cournot proof-of-reasoning bundles.",
        epilog=grouped_listing(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # help=SUPPRESS: the flat list argparse would print is replaced by the grouped epilog;
    # prog: "usage: ledger prove ..." rather than the top-level usage string in front of every command
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", help=argparse.SUPPRESS, prog="ledger"
    )
    wanted = MODULES if commands is None else {command.module for command in commands}
    for module in MODULES:
        if module in wanted:
            import_module(module).register(subparsers)
    return parser, subparsers


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Each command's parser by name (for tests and tools that walk the command line)."""
    return dict(build_parser()[1].choices)
