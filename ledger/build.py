"""mypyc compilation of the ledger's hot pure modules, with the engine's (``make install``, ``make compile``).

``python -m ledger.build [--clean | --check | --if-possible]`` is :func:`engine.build.main` over
two groups: the engine's (:data:`engine.build.ENGINE`) and :data:`LEDGER`, each compiled into its
own shared library (``ledger/_compiled__mypyc`` here). :mod:`engine.loader`'s finder, installed for
``ledger.*`` by ``ledger/__init__.py``, chooses between build and sources exactly as for the
engine: ``LEDGER_ENGINE=auto|pure|compiled``, and a build older than its source is refused in a
source checkout.

:data:`LEDGER` holds, chosen by profile (``py-spy --native`` of ``ledger verify`` and ``ledger
replay``), pure functions and plain classes only: the per-submission checks of ``ledger verify``
(entries, the entry kinds each status allows, steps, roots), its canonical-form checks, the storing
of the leaves its ledger pass proved for the log check and the root of a whole tile
(``ledger.translog.leaf_fill``), replay's text-only identity check, and the
append path's per-entry texts made before the lock (``ledger.store.chain_text``: the hash chain,
``trace.step`` payloads, the header; ``ledger.store.copy_text`` and ``ledger.store.copy_binary``:
the entries' COPY data). No
dataclass, named tuple or Pydantic model is defined in them (a compiled dataclass has no
``__dict__`` and pickles otherwise: :class:`ledger.verify.problems.Problem` and the replay results
cross process boundaries and stay interpreted; ``tests/unit/test_engine_build.py`` pins this).
"""

from __future__ import annotations

import sys

from engine.build import ENGINE, BuildGroup
from engine.build import main as build_main

__all__ = ["GROUPS", "LEDGER", "main"]

LEDGER = BuildGroup(
    "ledger",
    (
        "ledger/verify/canonical_scan.py",
        "ledger/verify/canonical_form.py",
        "ledger/verify/checks.py",
        "ledger/verify/kinds.py",
        "ledger/verify/roots.py",
        "ledger/translog/leaf_fill.py",
        "ledger/replay/identical.py",
        "ledger/store/chain_text.py",
        "ledger/store/copy_text.py",
        "ledger/store/copy_binary.py",
    ),
)
"""The ledger's compiled modules (sources relative to the repository root)."""

GROUPS = (ENGINE, LEDGER)
"""Everything ``make install`` compiles, in build order."""

COMPILED_MODULES = LEDGER.modules
"""For :mod:`engine.loader` (``LEDGER_ENGINE=compiled`` requires a build of each of these)."""


def main(argv: list[str] | None = None) -> int:
    """``python -m ledger.build [--clean | --check | --if-possible]`` over :data:`GROUPS`."""
    return build_main(argv, GROUPS)


if __name__ == "__main__":
    sys.exit(main())
