"""``audit-log``: the independent verifier's command (``ledger audit-log``, ``python -m ledger.translog``).

Imports only the database-free modules (no SQLAlchemy, no driver, no settings).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ledger.translog.keys import SigningKeyError, load_public_key


def add_audit_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``audit-log``, the independent verifier (also ``python -m ledger.translog audit-log``)."""
    p = subparsers.add_parser(
        "audit-log",
        description="Checks signatures, inclusion and consistency proofs and exported entries against a public "
        "key; prints one line per check and exits 1 if any fails (2 if it cannot run).",
    )
    p.add_argument("paths", nargs="*", type=Path, help="notes, proof bundles, entries.jsonl or directories")
    p.add_argument(
        "--public-key", type=Path, required=True, help="the log's public key (PEM or verifier key)"
    )
    p.add_argument("--origin", default=None, help="require this origin (default: the first checkpoint's)")
    p.add_argument("--topic", default=None, help="also read checkpoints from this Kafka topic")
    p.add_argument("--bootstrap", default=None, help="Kafka bootstrap (default: LEDGER_KAFKA_BOOTSTRAP)")
    p.set_defaults(handler=run_audit)


EXIT_USAGE = 2  # the audit could not run: no readable key, nothing to audit, an unreadable topic


def _error(command: str, message: object) -> int:
    print(f"ledger {command}: {message}", file=sys.stderr)
    return EXIT_USAGE


def run_audit(args: argparse.Namespace) -> int:
    """The independent verifier."""
    import os

    from ledger.translog.auditfiles import audit_files, read_topic_notes

    try:
        public_key = load_public_key(args.public_key)
    except SigningKeyError as exc:
        return _error("audit-log", exc)
    topic_notes: list[tuple[str, bytes]] = []
    if args.topic:
        bootstrap = args.bootstrap or os.environ.get("LEDGER_KAFKA_BOOTSTRAP", "")
        if not bootstrap:
            return _error("audit-log", "--topic needs --bootstrap or LEDGER_KAFKA_BOOTSTRAP")
        try:
            topic_notes = read_topic_notes(bootstrap, args.topic)
        except Exception as exc:
            return _error("audit-log", f"cannot read topic {args.topic}: {exc}")
    if not args.paths and not topic_notes:
        return _error("audit-log", "nothing to audit: give files, directories or --topic")
    missing = [str(path) for path in args.paths if not path.exists()]
    if missing:
        return _error("audit-log", f"no such file or directory: {', '.join(missing)}")
    report = audit_files(public_key, args.paths, origin=args.origin, topic_notes=topic_notes)
    print(report.render())
    return 0 if report.ok else 1
