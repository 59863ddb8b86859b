"""``ledger up`` / ``ledger down`` / ``ledger status``: the embedded services in the background."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cli.exit_status import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from cli.options import add_format
from cli.progress import StepProgress
from devstack.extra import EmbeddedExtraMissing, EmbeddedServiceError, require_embedded_extra
from devstack.stack import LocalStack, StackInfo, corpus_hint
from ledger.settings import get_settings

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``up``, ``down`` and ``status`` to the ``ledger`` command line."""
    parser = subparsers.add_parser(
        "up",
        description=(
            "Starts the embedded PostgreSQL (data in <state_dir>/postgres, kept across restarts) and the "
            "embedded tansu broker (memory storage: topics are lost on `ledger down`) as background "
            "processes, creates the 'ledger' database and migrates it. Other commands, run from any "
            "directory, find them through <state_dir>/postgres.json and broker.json (state dir: "
            "LEDGER_STATE_DIR, default $XDG_STATE_HOME/ledger or ~/.local/state/ledger). Re-running it "
            "is harmless."
        ),
    )
    add_format(parser, json_help="one JSON object")
    parser.set_defaults(handler=run_up)
    parser = subparsers.add_parser(
        "down",
        description="Stops the embedded broker and PostgreSQL of the state directory; data stays on disk.",
    )
    parser.set_defaults(handler=run_down)
    parser = subparsers.add_parser(
        "status",
        description=(
            f"Exit status 0 when every service runs, {EXIT_FAILED} otherwise (what it checks failed). 'stale' means a state "
            "file names a process that is gone (`ledger up` or `ledger down` clears it)."
        ),
    )
    add_format(parser, json_help="one JSON object")
    parser.set_defaults(handler=run_status)


def _override_warnings() -> list[str]:
    settings = get_settings()
    warnings = []
    if settings.database_url:
        warnings.append("LEDGER_DATABASE_URL is set: other commands will use it, not this embedded server")
    if settings.kafka_bootstrap:
        warnings.append("LEDGER_KAFKA_BOOTSTRAP is set: other commands will use it, not this embedded broker")
    return warnings


def print_up(info: StackInfo, warnings: list[str]) -> None:
    """The human-readable report of ``ledger up``."""
    verb = "started" if info.started else "already running"
    print(f"ledger services {verb} (state in {info.state_dir})")
    print(f"  postgres  pid {info.postgres_pid}  data {info.state_dir / 'postgres'}")
    print(f"  broker    pid {info.broker_pid}  memory storage (topics are lost on `ledger down`)")
    print()
    print(f"database URL  {info.database_url}")
    print(f"psql          {info.psql_command}")
    print(f"bootstrap     {info.bootstrap}")
    print()
    where = "this directory" if not Path(get_settings().state_dir).is_absolute() else "any directory"
    print(f"Commands run from {where} pick these up with no variables set, e.g.:")
    corpus = corpus_hint()
    print(f"  ledger publish {corpus}/bundles/*.json && ledger publish --raw {corpus}/poison/*.json")
    print("  ledger consume --until-idle 3")
    print(f"  {info.psql_command} -c 'SELECT market_id, outcome FROM ledger.verdicts'")
    print("  ledger replay --all && ledger verify")
    print("  ledger status; ledger down")
    if not str(get_settings().state_dir).startswith("/"):
        print(f"(elsewhere: export LEDGER_STATE_DIR={info.state_dir})")
    for warning in warnings:
        print(f"warning: {warning}")


def run_up(args: argparse.Namespace) -> int:
    """Start both services (or adopt running ones) and print how to reach them."""
    require_embedded_extra()
    stack = LocalStack(get_settings())
    try:
        info = stack.up(StepProgress(prefix="ledger up"))
    except EmbeddedExtraMissing:
        raise  # cli.main.run prints the one line naming the extra
    except (EmbeddedServiceError, OSError) as exc:  # e.g. a state dir that cannot be created
        print(f"ledger up: {exc}", file=sys.stderr)
        return EXIT_USAGE
    warnings = _override_warnings()
    if args.format == "json":
        report = {
            "state_dir": str(info.state_dir),
            "database_url": info.database_url,
            "sqlalchemy_url": info.sqlalchemy_url,
            "psql": info.psql_command,
            "bootstrap": info.bootstrap,
            "postgres_pid": info.postgres_pid,
            "broker_pid": info.broker_pid,
            "started": list(info.started),
            "warnings": warnings,
        }
        print(json.dumps(report))
    else:
        print_up(info, warnings)
    return 0


def run_down(args: argparse.Namespace) -> int:
    """Stop both services and report what was stopped."""
    stack = LocalStack(get_settings())
    try:
        stopped, killed = stack.down()
    except EmbeddedExtraMissing:
        raise  # cli.main.run prints the one line naming the extra
    except (EmbeddedServiceError, OSError) as exc:  # e.g. a state dir that cannot be created
        print(f"ledger down: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if stopped:
        print(f"stopped {', '.join(stopped)} (state in {stack.state_dir}; database files kept)")
    else:
        print(f"nothing was running (state in {stack.state_dir})")
    if killed:
        print(f"also stopped leftover server processes: {', '.join(map(str, killed))}")
    return 0


def run_status(args: argparse.Namespace) -> int:
    """Print each service's state; exit 0 only when all run."""
    stack = LocalStack(get_settings())
    reports = stack.status()
    all_running = all(report.state == "running" for report in reports)
    if args.format == "json":
        print(json.dumps({"state_dir": str(stack.state_dir), "services": [r.as_dict() for r in reports]}))
    else:
        print(f"state dir {stack.state_dir}")
        for report in reports:
            pid = f"pid {report.pid}" if report.pid else "-"
            port = f"port {report.port}" if report.port else "-"
            print(
                f"  {report.name:<9} {report.state:<9} {pid:<11} {port:<11} {report.address or ''}".rstrip()
            )
        states = {report.state for report in reports}
        if "stale" in states:
            print("stale: a state file names a process that is gone; `ledger up` or `ledger down` clears it")
        if "orphaned" in states:
            print(
                "orphaned: a server on this state dir that no state file names (a foreground server of "
                "another ledger command, or a leftover); `ledger up` adopts it, `ledger down` stops it"
            )
        if not all_running:
            print("start them with `ledger up`")
    return EXIT_OK if all_running else EXIT_FAILED
