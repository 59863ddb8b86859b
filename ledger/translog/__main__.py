"""``python -m ledger.translog audit-log ...``: the independent verifier on its own.

Imports only the database-free modules (no SQLAlchemy, no driver, no settings), so an auditor can
run it from a checkout without any ledger infrastructure.
"""

from __future__ import annotations

import argparse
import sys

from ledger.translog.audit_command import add_audit_command


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run ``audit-log``."""
    parser = argparse.ArgumentParser(prog="python -m ledger.translog")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_audit_command(subparsers)
    args = parser.parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
