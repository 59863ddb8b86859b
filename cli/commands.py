"""The table of ``ledger`` commands: name, the module that registers it, its journey and summary.

This table is the only list of commands. ``ledger --help`` prints it without importing any command
module; ``ledger NAME ...`` imports only the module that registers ``NAME``. Each module exposes
``register(subparsers)``, adds its parser(s) and sets ``handler=`` to ``(argparse.Namespace) -> int``.
"""

from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):
    """One ``ledger`` sub-command (a NamedTuple: ``dataclasses`` alone would double the start-up time)."""

    name: str
    module: str  # imported only when this command runs
    group: str  # the journey it is listed under in ``ledger --help``
    summary: str  # the one line ``ledger --help`` prints for it


PUBLISH = "publish and consume"
QUERY = "query and check one submission"
REPLAY = "replay and verify"
TRANSLOG = "transparency log"
STACK = "local stack"

GROUPS: tuple[str, ...] = (PUBLISH, QUERY, REPLAY, TRANSLOG, STACK)

COMMANDS: tuple[Command, ...] = (
    Command("publish", "cli.publish", PUBLISH, "validate and send evidence bundles to the Kafka topic"),
    Command(
        "consume",
        "cli.consume",
        PUBLISH,
        "audit records from the topic into the ledger (consumer-group member)",
    ),
    Command(
        "reason-worker",
        "cli.reason",
        PUBLISH,
        "verify submissions that requested it and append reasoning.verified entries",
    ),
    Command(
        "health", "cli.health", PUBLISH, "check database and broker reachability and print lag per partition"
    ),
    Command(
        "audit",
        "cli.audit",
        QUERY,
        "audit one envelope (or prompt spec + evidence bundle) offline and print the trace and roots",
    ),
    Command(
        "reason",
        "cli.reason",
        QUERY,
        "verify a formula against a query with the LLM providers and print the result",
    ),
    Command(
        "serve",
        "cli.serve",
        QUERY,
        "serve the ledger over HTTP: JSON API, proofs and C2SP tlog-tiles (read-only)",
    ),
    Command(
        "replay",
        "cli.replay",
        REPLAY,
        "re-run the engine on stored inputs and compare every step hash, root and verdict",
    ),
    Command(
        "verify",
        "cli.replay",
        REPLAY,
        "recompute every hash, chain, step and root from stored bytes; check the log's checkpoints",
    ),
    Command("verify-por", "cli.por", REPLAY, "verify Cournot PoR packs (directory, .zip or JSON document)"),
    Command("replay-por", "cli.por", REPLAY, "re-verify stored PoR packs; every report must be identical"),
    Command(
        "keygen", "cli.translog", TRANSLOG, "create the Ed25519 checkpoint signing key (PATH and PATH.pub)"
    ),
    Command("checkpoint", "cli.translog", TRANSLOG, "extend the tree, then sign and store a checkpoint"),
    Command("prove", "cli.translog", TRANSLOG, "inclusion proof of an entry, or --consistency OLD NEW"),
    Command(
        "export-log",
        "cli.translog",
        TRANSLOG,
        "write checkpoints, consistency proofs and entries for auditors",
    ),
    Command("verify-log", "cli.translog", TRANSLOG, "check every checkpoint against the stored entries"),
    Command(
        "audit-log",
        "cli.translog",
        TRANSLOG,
        "independent verifier (no database): checkpoints, proofs and exported entries",
    ),
    Command(
        "demo",
        "cli.demo",
        STACK,
        "run the whole pipeline once on embedded services and print what the ledger holds",
    ),
    Command(
        "up",
        "cli.stack",
        STACK,
        "start the embedded PostgreSQL and Kafka broker in the background and migrate",
    ),
    Command(
        "status",
        "cli.stack",
        STACK,
        "show the background services: running, stopped or stale, with pid and port",
    ),
    Command("down", "cli.stack", STACK, "stop the background services started by `ledger up`"),
    Command("migrate", "cli.migrate", STACK, "create or upgrade the ledger schema (Alembic upgrade head)"),
)

# The order modules register in when every command is wanted (argparse lists choices in this order).
MODULES: tuple[str, ...] = (
    "cli.audit",
    "cli.migrate",
    "cli.por",
    "cli.replay",
    "cli.reason",
    "cli.translog",
    "cli.publish",
    "cli.consume",
    "cli.health",
    "cli.demo",
    "cli.stack",
    "cli.serve",
)


def command_names() -> frozenset[str]:
    """Every sub-command the ``ledger`` console script offers."""
    return frozenset(command.name for command in COMMANDS)


def find(name: str) -> Command | None:
    """The command called ``name``, if there is one."""
    return next((command for command in COMMANDS if command.name == name), None)
