"""``engine.loader``: which build runs, and a stale or missing build is refused, never used, for the
engine's compiled modules and for the ledger's (``ledger.build``), one finder per package.

These run a copy of the ``engine`` and ``ledger`` packages in a subprocess, with a fake extension
module (empty bytes: it must never be loaded) next to one compiled module's source, so they need
no C compiler.
"""

from __future__ import annotations

import importlib.machinery
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.build import ROOT

SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]
# one compiled module per group (engine.build.ENGINE, ledger.build.LEDGER), by its dotted name
GROUP_MODULES = ["engine.canonical", "ledger.verify.canonical_form"]


def _probe_code(module: str) -> str:
    """Import ``module``, print which build it came from and its file."""
    package = module.partition(".")[0]
    return (
        f"import {package}, {module} as m, engine.loader as l; print(l.active_build({module!r}), m.__file__)"
    )


def _find_code(module: str) -> str:
    """Only resolve ``module`` (its parent imported first, nothing compiled loaded)."""
    parent = module.rpartition(".")[0]
    return f"import importlib.util, {parent}; print(importlib.util.find_spec({module!r}).origin)"


def _tree_copy(tmp_path: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", *(f"*{s}" for s in importlib.machinery.EXTENSION_SUFFIXES))
    for package in ("engine", "ledger"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")  # a source checkout
    return tmp_path


def _fake_build(tree: Path, module: str, *, older: bool) -> Path:
    source = tree.joinpath(*module.split(".")).with_suffix(".py")
    extension = source.with_name(source.stem + SUFFIX)
    extension.write_bytes(b"")
    stamp = source.stat().st_mtime + (-100 if older else 100)
    os.utime(extension, (stamp, stamp))
    return extension


def _run(tree: Path, code: str, mode: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LEDGER_ENGINE")}
    env["PYTHONPATH"] = str(tree)
    if mode is not None:
        env["LEDGER_ENGINE"] = mode
    return subprocess.run(
        [sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True, timeout=120
    )


def _probe(
    tree: Path, mode: str | None, module: str = "engine.canonical"
) -> subprocess.CompletedProcess[str]:
    return _run(tree, _probe_code(module), mode)


def test_the_probed_modules_are_compiled_ones() -> None:
    from engine.build import ENGINE
    from ledger.build import LEDGER

    assert [
        next(iter(sorted(g.module_names() & set(GROUP_MODULES)))) for g in (ENGINE, LEDGER)
    ] == GROUP_MODULES


@pytest.mark.parametrize("module", GROUP_MODULES)
def test_a_stale_build_is_refused_with_the_fix(tmp_path: Path, module: str) -> None:
    tree = _tree_copy(tmp_path)
    _fake_build(tree, module, older=True)
    done = _probe(tree, None, module)
    assert done.returncode != 0
    assert "EngineBuildError" in done.stderr and "make compile" in done.stderr
    assert f"{module}: the compiled build is older" in done.stderr


@pytest.mark.parametrize("module", GROUP_MODULES)
def test_pure_mode_runs_the_sources_beside_a_build(tmp_path: Path, module: str) -> None:
    tree = _tree_copy(tmp_path)
    _fake_build(tree, module, older=False)
    done = _probe(tree, "pure", module)
    assert done.returncode == 0, done.stderr
    build, origin = done.stdout.split()
    assert build == "pure" and origin.endswith(module.rpartition(".")[2] + ".py")


@pytest.mark.parametrize("module", GROUP_MODULES)
def test_without_a_build_auto_runs_pure_and_compiled_mode_refuses(tmp_path: Path, module: str) -> None:
    tree = _tree_copy(tmp_path)
    auto = _probe(tree, None, module)
    assert auto.returncode == 0, auto.stderr
    assert auto.stdout.split()[0] == "pure"
    strict = _run(tree, _find_code(module), "compiled")
    assert (
        strict.returncode != 0
        and f"{module}: LEDGER_ENGINE=compiled but there is no compiled build" in strict.stderr
    )


def test_compiled_mode_leaves_modules_outside_the_groups_alone(tmp_path: Path) -> None:
    tree = _tree_copy(tmp_path)
    done = _run(tree, _find_code("ledger.verify.problems"), "compiled")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("problems.py")


def test_an_unknown_mode_is_refused(tmp_path: Path) -> None:
    done = _probe(_tree_copy(tmp_path), "fast")
    assert done.returncode != 0 and "expected one of auto, pure, compiled" in done.stderr


@pytest.mark.parametrize("mode", ["pure", "auto"])
def test_goldens_hold_for_each_build(mode: str) -> None:
    """The goldens byte for byte with the sources, and with the compiled build when there is one."""
    env = {k: v for k, v in os.environ.items() if k != "LEDGER_ENGINE"}
    env["LEDGER_ENGINE"] = mode
    done = subprocess.run(
        [sys.executable, "-m", "tests.golden.regenerate", "--check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
