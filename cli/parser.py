"""The ``ledger`` command line.

Each command lives in its own module exposing ``register(subparsers)``; the module adds a parser
and sets ``handler=`` to a function ``(argparse.Namespace) -> int``. ``ledger`` never imports
``consumers``: the console script is ``cli.main:main``, which adds the Kafka commands
(publish, consume, demo, up/down/status) to the ones registered here.

``ledger --help`` lists the commands grouped by journey (:data:`COMMAND_GROUPS`); the one-line
summary of each is the ``help=`` its module passed to ``add_parser``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib import import_module
from typing import Any

from devstack.extra import EmbeddedExtraMissing

Registrar = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]

EXIT_MISSING_EXTRA = 2  # the command needs an optional extra that is not installed

LEDGER_COMMAND_MODULES: tuple[str, ...] = (
    # one module per command group; each defines register(subparsers)
    "cli.audit",
    "cli.migrate",
    "cli.por",
    "cli.replay",
    "cli.reason",
    "cli.translog",
)

COMMAND_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("publish and consume", ("publish", "consume", "reason-worker", "health")),
    ("query and check one submission", ("audit", "reason", "serve")),
    ("replay and verify", ("replay", "verify", "verify-por", "replay-por")),
    ("transparency log", ("keygen", "checkpoint", "prove", "export-log", "verify-log", "audit-log")),
    ("local stack", ("demo", "up", "status", "down", "migrate")),
)
OTHER_GROUP = "other commands"

EPILOG_TAIL = (
    "Query the ledger with SQL: the views live in schema ledger (`ledger up` prints the psql line).\n"
    "Run `ledger COMMAND --help` for the options of one command."
)


class _SummarisedSubParsers(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The subcommand action, remembering each command's one-line ``help`` for the grouped listing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.summaries: dict[str, str] = {}

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        """Add a command parser and record its summary."""
        self.summaries[name] = str(kwargs.get("help") or "")
        parser: argparse.ArgumentParser = super().add_parser(name, **kwargs)
        return parser


def grouped_listing(summaries: dict[str, str]) -> str:
    """The command list of ``ledger --help``, grouped by journey; unlisted commands go last."""
    width = max((len(name) for name in summaries), default=0) + 2
    blocks: list[str] = []
    groups = [*COMMAND_GROUPS, (OTHER_GROUP, tuple(n for n in summaries if not _in_groups(n)))]
    for title, names in groups:
        lines = [f"  {name.ljust(width)}{summaries[name]}" for name in names if name in summaries]
        if lines:
            blocks.append(f"{title}:\n" + "\n".join(lines))
    return "\n\n".join([*blocks, EPILOG_TAIL])


def _in_groups(name: str) -> bool:
    return any(name in names for _, names in COMMAND_GROUPS)


def _registrars(module_names: Sequence[str]) -> list[Registrar]:
    return [import_module(name).register for name in module_names]


def build_parser(extra: Sequence[Registrar] = ()) -> argparse.ArgumentParser:
    """The full argument parser: ledger commands plus any ``extra`` registrars."""
    return _build(extra)[0]


def _build(extra: Sequence[Registrar]) -> tuple[argparse.ArgumentParser, _SummarisedSubParsers]:
    parser = argparse.ArgumentParser(
        prog="ledger",
        usage="ledger [-h] COMMAND ...",
        description="Verification ledger for Cournot proof-of-reasoning bundles.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.register("action", "parsers", _SummarisedSubParsers)
    # help=SUPPRESS: the flat list argparse would print is replaced by the grouped epilog
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", help=argparse.SUPPRESS)
    for register in [*_registrars(LEDGER_COMMAND_MODULES), *extra]:
        register(subparsers)
    assert isinstance(subparsers, _SummarisedSubParsers)
    parser.epilog = grouped_listing(subparsers.summaries)
    return parser, subparsers


def command_parsers(extra: Sequence[Registrar] = ()) -> dict[str, argparse.ArgumentParser]:
    """Each command's parser by name (for tests and tools that walk the command line)."""
    return dict(_build(extra)[1].choices)


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
