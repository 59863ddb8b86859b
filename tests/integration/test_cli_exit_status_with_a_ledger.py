"""Exit statuses that need a real ledger database (the rest: tests/unit/test_cli_exit_status.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CLOSED = "127.0.0.1:1"  # nothing listens on port 1


def test_consume_with_the_ledger_up_and_no_broker_is_an_environment_error(
    migrated_database_url: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env |= {"PYTHONPATH": str(ROOT), "LEDGER_STATE_DIR": str(tmp_path / "state")}
    args = ["consume", "--database-url", migrated_database_url, "--bootstrap", CLOSED, "--until-idle", "1"]
    done = subprocess.run(
        [sys.executable, "-m", "cli", *args, "--log-format", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    events = [json.loads(line) for line in done.stderr.splitlines() if line.strip()]
    assert any(event["event"] == "broker error" for event in events), events
    (summary,) = [event for event in events if event["event"] == "consume summary"]
    assert summary["outcome"] == "failed"
