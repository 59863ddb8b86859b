"""mypyc compilation of the engine's hot pure modules, in place (``make install``, ``make compile``).

``python -m engine.build`` compiles :data:`COMPILED_MODULES` with mypyc into extension modules
next to their sources (one shared library, ``engine/_compiled__mypyc``, plus one small shim per
module); :mod:`engine.loader` then imports the extension instead of the ``.py`` file. The same
step serves other packages: a :class:`BuildGroup` names a package and its modules, and
``python -m ledger.build`` (what ``make install`` runs) compiles the engine's group and the
ledger's, each into its own shared library. ``make install`` runs it with ``--if-possible``: compiled where mypyc and a C compiler are present, the
pure engine elsewhere (a wheel from ``pip install`` is pure too). The pure sources stay the
reference and give the same bytes (the goldens are checked both ways); ``LEDGER_ENGINE=pure``
runs them beside a build. ``--clean`` removes every extension this step made; ``--check`` fails
when an extension is older than its source (the loader also refuses to import one: a stale build
would otherwise shadow an edit).

The list holds modules whose behaviour mypyc keeps: Pydantic models (``engine.schemas``) stay
interpreted (only ``engine.schemas.trusted``, which builds models and defines none, is compiled),
and so do ``engine.merkle.cournot`` (mypyc's native ints would skip its explicit ``bool`` refusal on an ``int`` parameter; its root fold, ``engine.merkle.cournot_fold``, takes no int and is compiled) and ``engine.auditor.config`` (a native ``float`` field
would store ``AuditConfig(numeric_tolerance=0)`` as ``0.0``, and the value is committed). The judge
is compiled: its ``float`` fields only ever receive floats (``round_confidence``, ``float()`` on
policy numbers; pinned in ``tests/unit/test_engine_build.py``). mypyc and a C compiler are needed only here (mypy,
which ships mypyc, is in the ``test`` extra).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import sysconfig
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "COMPILED_MODULES",
    "ENGINE",
    "GROUP",
    "BuildGroup",
    "clean",
    "compiled_files",
    "extensions",
    "main",
    "missing_toolchain",
    "stale_modules",
]

ROOT = Path(__file__).resolve().parent.parent
COMPILED_MODULES = (
    "engine/canonical.py",
    "engine/canonical_models.py",
    "engine/float_spelling.py",
    "engine/commitments.py",
    "engine/pipeline_fields.py",
    "engine/jsonio.py",
    "engine/merkle/cournot_fold.py",
    "engine/schemas/trusted.py",
    "engine/schemas/utc.py",
    "engine/auditor/agent.py",
    "engine/auditor/checks.py",
    "engine/auditor/record.py",
    "engine/auditor/analysis.py",
    "engine/auditor/built_models.py",
    "engine/auditor/report.py",
    "engine/auditor/trace_builder.py",
    "engine/auditor/verification/logic_sanity.py",
    "engine/auditor/verification/event_checks.py",
    "engine/auditor/verification/key_scan.py",
    "engine/auditor/verification/trace_policy.py",
    "engine/auditor/reasoning/claim_extraction.py",
    "engine/auditor/reasoning/claims.py",
    "engine/auditor/reasoning/item_fields.py",
    "engine/auditor/reasoning/contradiction_checks.py",
    "engine/auditor/reasoning/patterns.py",
    "engine/auditor/reasoning/regex_guard.py",
    "engine/auditor/reasoning/selection.py",
    "engine/auditor/reasoning/semantics.py",
    "engine/auditor/reasoning/values.py",
    "engine/judge/agent.py",
    "engine/judge/policy.py",
    "engine/judge/rules.py",
    "engine/judge/schema_lock.py",
    "engine/judge/variables.py",
)
"""Sources compiled by :func:`main`, relative to the repository root."""


@dataclass(frozen=True)
class BuildGroup:
    """The modules of one package compiled together into one shared library,
    ``<package>/_compiled__mypyc``; another package (``ledger.build``) declares its own group."""

    package: str
    modules: tuple[str, ...]
    """Sources relative to the repository root, all under ``<package>/``."""

    @property
    def name(self) -> str:
        """The shared library's module name, inside the package."""
        return f"{self.package}._compiled"

    def module_names(self) -> frozenset[str]:
        """The dotted names of :attr:`modules`."""
        return frozenset(source.removesuffix(".py").replace("/", ".") for source in self.modules)


ENGINE = BuildGroup("engine", COMPILED_MODULES)
"""The engine's group: the only one ``python -m engine.build`` knows (the engine imports nothing of ours)."""
GROUP = ENGINE.name
"""The shared library's module name (``engine/_compiled__mypyc.<abi>.so``), inside the package."""

_SUFFIXES = (".so", ".pyd")


def compiled_files(root: Path = ROOT, groups: Sequence[BuildGroup] = (ENGINE,)) -> list[Path]:
    """Every extension module under the groups' packages (all made by this step: the sources are
    pure Python)."""
    return sorted(
        path for group in groups for path in (root / group.package).rglob("*") if path.suffix in _SUFFIXES
    )


def stale_modules(root: Path = ROOT, groups: Sequence[BuildGroup] = (ENGINE,)) -> list[str]:
    """Compiled modules whose source changed after the build (these would shadow the edit)."""
    stale: list[str] = []
    for source in (source for group in groups for source in group.modules):
        path = root / source
        for candidate in path.parent.glob(path.stem + ".*"):
            if candidate.suffix in _SUFFIXES and candidate.stat().st_mtime < path.stat().st_mtime:
                stale.append(source)
    return stale


def clean(root: Path = ROOT, groups: Sequence[BuildGroup] = (ENGINE,)) -> list[Path]:
    """Remove every extension this step made; returns what was removed."""
    removed = compiled_files(root, groups)
    for path in removed:
        path.unlink()
    return removed


def missing_toolchain() -> str | None:
    """Why this interpreter cannot compile the engine, or ``None`` when it can."""
    try:
        import mypyc.build  # noqa: F401
        import setuptools  # noqa: F401
    except ImportError as exc:  # Python 3.12+ virtualenvs come without setuptools
        return f"{exc.name} is not installed (pip install mypy setuptools)"
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler}) on the PATH"
    if (
        not sysconfig.get_paths().get("include")
        or not Path(sysconfig.get_paths()["include"], "Python.h").is_file()
    ):
        return "the Python headers (Python.h) are not installed"
    return None


def extensions(groups: Sequence[BuildGroup], target_dir: str) -> list[Any]:
    """The setuptools extensions of every group, their C sources under ``target_dir/<package>``: one
    mypyc run per group, each self-contained (a group calls another's modules through Python, so
    either can be rebuilt alone)."""
    from mypyc.build import mypycify

    made: list[Any] = []
    for group in groups:
        target = str(Path(target_dir) / group.package)
        made += mypycify(list(group.modules), group_name=group.name, target_dir=target, opt_level="3")
    return made


def build(root: Path = ROOT, groups: Sequence[BuildGroup] = (ENGINE,)) -> None:
    """Compile the groups' modules in place (needs mypyc, setuptools and a C compiler)."""
    from setuptools import Distribution

    clean(root, groups)
    with tempfile.TemporaryDirectory(prefix="engine-mypyc-") as work:
        built = extensions(groups, str(Path(work) / "c"))
        # A bare Distribution: the project's pyproject.toml is not read (older setuptools reject
        # its SPDX ``license`` string), only the extensions are built, in place.
        distribution = Distribution({"name": "engine-compiled", "ext_modules": built})
        distribution.script_args = [
            "build_ext",
            "--inplace",
            "--build-temp",
            str(Path(work) / "tmp"),
            "--build-lib",
            str(Path(work) / "lib"),
        ]
        distribution.parse_command_line()
        distribution.run_commands()


def main(argv: list[str] | None = None, groups: Sequence[BuildGroup] = (ENGINE,)) -> int:
    """``python -m engine.build [--clean | --check | --if-possible]`` over ``groups`` (the engine's
    alone here; ``python -m ledger.build`` passes the ledger's too)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--clean", action="store_true", help="remove the compiled extension modules")
    action.add_argument("--check", action="store_true", help="fail when a compiled module is stale")
    action.add_argument(
        "--if-possible",
        action="store_true",
        help="compile when mypyc and a C compiler are present, else keep the pure engine (exit 0)",
    )
    args = parser.parse_args(argv)
    if args.clean:
        removed = clean(ROOT, groups)
        print(f"removed {len(removed)} compiled file(s)")
        return 0
    if args.check:
        stale = stale_modules(ROOT, groups)
        if stale:
            print(
                "stale compiled module(s), run `make compile` or `make clean-compiled`: " + ", ".join(stale)
            )
            return 1
        print(f"{len(compiled_files(ROOT, groups))} compiled file(s), none stale")
        return 0
    missing = missing_toolchain()
    if missing is not None:
        if args.if_possible:
            # The pure engine is the reference and gives the same bytes; only speed is lost.
            packages = ", ".join(group.package for group in groups)
            print(f"{packages}: pure Python ({missing}; `make compile` once it is there)")
            return 0
        print(f"cannot compile: {missing}")
        return 2
    os.chdir(ROOT)  # mypyc names modules from paths relative to the repository root
    build(ROOT, groups)
    count = sum(len(group.modules) for group in groups)
    print(f"compiled {count} module(s) into {len(compiled_files(ROOT, groups))} extension file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
