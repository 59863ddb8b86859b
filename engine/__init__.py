"""engine package: the deterministic Auditor, Judge and commitments.

Importing it installs :mod:`engine.loader`'s finder, which picks the compiled build or the pure
sources for every ``engine.*`` module (``LEDGER_ENGINE``) and refuses a stale compiled build.
"""

from engine import loader as _loader

_loader.install()
