"""The project's PEP 517 backend: setuptools, plus mypy when ``LEDGER_MYPYC=1`` asks for a compiled wheel.

A plain ``pip install`` / ``pip wheel`` builds a pure-Python wheel (``py3-none-any``). With
``LEDGER_MYPYC=1`` the engine's and the ledger's hot modules (``ledger.build.GROUPS``) are compiled with
mypyc into a platform wheel, the way black ships its wheels; ``setup.py`` does the compiling, this
module only adds mypy (which ships mypyc) and the project's own dependencies (mypyc type-checks the
engine and the ledger against pydantic and the rest) to the isolated build environment for that case.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403  (the backend's other hooks, unchanged)

MYPYC_ENV = "LEDGER_MYPYC"
MYPYC_REQUIREMENT = "mypy>=1.10"


def get_requires_for_build_wheel(config_settings: dict[str, str] | None = None) -> list[str]:
    """setuptools' requirements, and mypy when a compiled wheel is asked for."""
    requires = list(_setuptools.get_requires_for_build_wheel(config_settings))
    if os.environ.get(MYPYC_ENV) == "1":
        project = tomllib.loads(Path("pyproject.toml").read_text(encoding="utf-8"))["project"]
        requires += [MYPYC_REQUIREMENT, *project["dependencies"]]
    return requires
