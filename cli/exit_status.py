"""The exit status every ``ledger`` command follows (``ledger --help`` and the README say the same).

0: ok. 1: the thing checked failed (a divergence, tampering, invalid input, a ledger or source log
that cannot be trusted, a service that ``health``/``status`` found down). 2: a usage or environment
error (bad options, an unreadable or missing file, a missing extra, no signing key, no ledger
database or broker reachable, a schema behind its code, no embedded service to manage).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # `ledger --help` imports this module and must not import the ledger package
    from ledger.errors import LedgerError

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "for_ledger_error"]

EXIT_OK = 0
EXIT_FAILED = 1  # the thing checked failed
EXIT_USAGE = 2  # usage or environment error: the check could not run


def for_ledger_error(exc: LedgerError) -> int:
    """2 when the database cannot be reached, used or trusted to be current; 1 for anything it refused."""
    from ledger.errors import LedgerPermissionError, LedgerUnavailableError, SchemaNotReadyError

    # the ledger errors that say the command could not run, not that the ledger failed a check
    environment = (LedgerUnavailableError, SchemaNotReadyError, LedgerPermissionError)
    return EXIT_USAGE if isinstance(exc, environment) else EXIT_FAILED
