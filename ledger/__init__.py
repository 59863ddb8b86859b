"""ledger package.

Importing it installs :mod:`engine.loader`'s finder for ``ledger.*``: the modules listed in
:mod:`ledger.build` run from their mypyc build when there is one (``LEDGER_ENGINE`` chooses, as for
the engine), and a stale build is refused.
"""

from engine import loader as _loader

_loader.install("ledger", "ledger.build")
