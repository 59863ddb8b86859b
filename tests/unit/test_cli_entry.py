"""The console entry point: a closed pipe ends ``ledger`` quietly, as it does Unix tools."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "devstack" / "demo_corpus" / "bundles" / "03_btc_sources_conflict.json"


def test_audit_into_a_closed_pipe_prints_no_traceback() -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "cli", "audit", str(SAMPLE)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # the reader went away before the report was written
    returncode = child.wait(timeout=120)
    stderr = child.stderr.read().decode()
    child.stderr.close()
    assert stderr == ""
    assert returncode == 141  # 128 + SIGPIPE
