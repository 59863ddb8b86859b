"""Only for the compiled wheel: everything else is in pyproject.toml.

``LEDGER_MYPYC=1 pip wheel .`` compiles ``ledger.build.GROUPS`` (the engine's hot modules and the
ledger's) with mypyc into the wheel (a platform wheel); without it the wheel is pure Python. See
``build_backend/ledger_build.py``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import setup

ext_modules = []
# setuptools also runs this file to ask for build requirements (``egg_info``, before mypy is there)
# and for metadata (``dist_info``); only the wheel build itself compiles, and it fails without mypyc.
if os.environ.get("LEDGER_MYPYC") == "1" and not {"egg_info", "dist_info"} & set(sys.argv):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from engine.build import extensions
    from ledger.build import GROUPS

    ext_modules = extensions(GROUPS, "build")  # one mypyc run and shared library per group

setup(ext_modules=ext_modules)
