"""Which engine runs: the mypyc-compiled extension modules or the pure-Python sources.

``make install`` compiles the engine's hot modules in place when a C compiler is present
(:mod:`engine.build`); a wheel holds the pure sources only. Both give the same bytes (the goldens
are checked both ways). ``LEDGER_ENGINE`` chooses at import time:

- ``auto`` (default): the compiled modules where present, the sources elsewhere;
- ``pure``: always the sources, even beside a compiled build (to compare, or to rule the build out);
- ``compiled``: refuse to import an engine module that has a source but no compiled build.

In a source checkout, a compiled module older than its source is never imported: it would silently
run code the source no longer says, so the import fails with the command that fixes it. (An
installed wheel ships its build with its sources; installers do not keep their file times.) :func:`install` puts the finder
that enforces this first on ``sys.meta_path``; ``engine/__init__.py`` calls it for ``engine.*``.
The finder is parametrised by package: ``ledger/__init__.py`` installs one for ``ledger.*`` (its
compiled modules are listed in ``ledger.build``), with the same modes and the same refusals.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Literal

__all__ = ["ENGINE_ENV", "EngineBuildError", "active_build", "engine_mode", "install"]

ENGINE_ENV = "LEDGER_ENGINE"
_MODES = ("auto", "pure", "compiled")
_EXTENSION_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)


class EngineBuildError(ImportError):
    """The engine build on disk cannot be used as asked (stale, missing, or a bad mode)."""


def engine_mode() -> str:
    """The mode ``LEDGER_ENGINE`` asks for (``auto`` when unset); any other value is refused."""
    mode = os.environ.get(ENGINE_ENV, "").strip().lower() or "auto"
    if mode not in _MODES:
        raise EngineBuildError(f"{ENGINE_ENV}={mode!r}: expected one of {', '.join(_MODES)}")
    return mode


def _source_beside(extension: str, fullname: str) -> Path:
    return Path(extension).parent / (fullname.rpartition(".")[2] + ".py")


class _PackageFinder(importlib.abc.MetaPathFinder):
    """Resolves ``<package>.*`` modules, choosing between a compiled build and its source."""

    def __init__(self, package: str, mode: str, package_dir: Path, modules_from: str) -> None:
        self.package = package
        self.prefix = package + "."
        self.shared = f"{package}._compiled"  # the group's shared library (engine.build.BuildGroup)
        self.mode = mode
        self.required = _compiled_module_names(modules_from) if mode == "compiled" else frozenset()
        # Only a source checkout (pyproject.toml beside the package) builds in place; an installed
        # wheel's file times are whatever the installer set, and its build came with its sources.
        self.checkout = (package_dir.parent / "pyproject.toml").is_file()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(self.prefix) or fullname.startswith(self.shared):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.origin is None:
            return spec
        if not spec.origin.endswith(_EXTENSION_SUFFIXES):
            if fullname in self.required:
                raise EngineBuildError(
                    f"{fullname}: {ENGINE_ENV}=compiled but there is no compiled build; run `make compile`"
                )
            return spec
        source = _source_beside(spec.origin, fullname)
        if not source.is_file():
            return spec
        if self.mode == "pure":
            return importlib.util.spec_from_file_location(fullname, source)
        if self.checkout and Path(spec.origin).stat().st_mtime < source.stat().st_mtime:
            raise EngineBuildError(
                f"{fullname}: the compiled build is older than {source.name}; run `make compile` "
                f"(or `make clean-compiled` for the pure engine, or set {ENGINE_ENV}=pure)"
            )
        return spec


def _compiled_module_names(modules_from: str) -> frozenset[str]:
    # imported before the finder is installed (a build module is never compiled itself)
    modules: Sequence[str] = importlib.import_module(modules_from).COMPILED_MODULES
    return frozenset(source.removesuffix(".py").replace("/", ".") for source in modules)


def install(package: str = "engine", modules_from: str = "engine.build") -> None:
    """Put the finder of ``package`` first on ``sys.meta_path`` (once per process and package).

    ``modules_from`` names the module whose ``COMPILED_MODULES`` (sources relative to the
    repository root) ``LEDGER_ENGINE=compiled`` requires a build of; it is imported in that mode
    only. Called from the package's ``__init__``, once the package module exists.
    """
    if any(isinstance(finder, _PackageFinder) and finder.package == package for finder in sys.meta_path):
        return
    package_file = sys.modules[package].__file__
    if package_file is None:
        raise EngineBuildError(f"{package} has no __init__ file: its build cannot be located")
    package_dir = Path(package_file).resolve().parent
    sys.meta_path.insert(0, _PackageFinder(package, engine_mode(), package_dir, modules_from))


def active_build(module: str = "engine.canonical") -> Literal["compiled", "pure"]:
    """``compiled`` when ``module`` (by default the engine's canonical encoder) runs from a mypyc
    build, else ``pure``."""
    loaded = importlib.import_module(module)
    return "compiled" if str(loaded.__file__).endswith(_EXTENSION_SUFFIXES) else "pure"
