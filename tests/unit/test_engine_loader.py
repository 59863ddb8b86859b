"""``engine.loader``: which engine build runs, and a stale or missing build is refused, never used.

These run a copy of the ``engine`` package in a subprocess, with a fake extension module (empty
bytes: it must never be loaded) next to ``canonical.py``, so they need no C compiler.
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
PROBE = "import engine.canonical, engine.loader as l; print(l.active_build(), engine.canonical.__file__)"


def _engine_copy(tmp_path: Path) -> Path:
    shutil.copytree(
        ROOT / "engine",
        tmp_path / "engine",
        ignore=shutil.ignore_patterns(
            "__pycache__", *(f"*{s}" for s in importlib.machinery.EXTENSION_SUFFIXES)
        ),
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")  # a source checkout
    return tmp_path


def _fake_build(tree: Path, *, older: bool) -> Path:
    source = tree / "engine" / "canonical.py"
    extension = tree / "engine" / f"canonical{SUFFIX}"
    extension.write_bytes(b"")
    stamp = source.stat().st_mtime + (-100 if older else 100)
    os.utime(extension, (stamp, stamp))
    return extension


def _probe(tree: Path, mode: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LEDGER_ENGINE")}
    env["PYTHONPATH"] = str(tree)
    if mode is not None:
        env["LEDGER_ENGINE"] = mode
    return subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tree, env=env, capture_output=True, text=True, timeout=120
    )


def test_a_stale_build_is_refused_with_the_fix(tmp_path: Path) -> None:
    tree = _engine_copy(tmp_path)
    _fake_build(tree, older=True)
    done = _probe(tree, None)
    assert done.returncode != 0
    assert "EngineBuildError" in done.stderr and "make compile" in done.stderr


def test_pure_mode_runs_the_sources_beside_a_build(tmp_path: Path) -> None:
    tree = _engine_copy(tmp_path)
    _fake_build(tree, older=False)
    done = _probe(tree, "pure")
    assert done.returncode == 0, done.stderr
    build, origin = done.stdout.split()
    assert build == "pure" and origin.endswith("canonical.py")


def test_without_a_build_auto_runs_pure_and_compiled_mode_refuses(tmp_path: Path) -> None:
    tree = _engine_copy(tmp_path)
    auto = _probe(tree, None)
    assert auto.returncode == 0, auto.stderr
    assert auto.stdout.split()[0] == "pure"
    strict = _probe(tree, "compiled")
    assert strict.returncode != 0 and "no compiled build" in strict.stderr


def test_an_unknown_mode_is_refused(tmp_path: Path) -> None:
    done = _probe(_engine_copy(tmp_path), "fast")
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
