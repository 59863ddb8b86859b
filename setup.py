"""Only for the compiled wheel: everything else is in pyproject.toml.

``LEDGER_MYPYC=1 pip wheel .`` compiles ``engine.build.COMPILED_MODULES`` with mypyc into the wheel
(a platform wheel); without it the wheel is pure Python. See ``build_backend/ledger_build.py``.
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
    from mypyc.build import mypycify

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from engine.build import COMPILED_MODULES, GROUP

    ext_modules = mypycify(list(COMPILED_MODULES), group_name=GROUP, opt_level="3")

setup(ext_modules=ext_modules)
