"""The exit status convention of every ``ledger`` command, run as a real process.

0 ok; 1 the thing checked failed; 2 a usage or environment error. Here: the environment errors
each command can meet with no service at all (a closed port, nothing running, no key, a missing
or unwritable file) and the checked failures that need no service. The checked failures that need
a ledger are asserted where the ledger is built: tampering (``verify-log``, ``prove``) in
tests/integration/test_translog_tamper.py, an untrusted source log (``consume``) in
tests/integration/test_consumer_source_undecided.py, divergences in the replay and verify tests;
a broker down with the ledger up (``consume``) in tests/integration/test_cli_exit_status_with_a_ledger.py,
a port already served (``serve``) in tests/api/test_api_access.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "devstack" / "demo_corpus" / "bundles" / "01_btc_above_100k_clean.json"
CLOSED = "127.0.0.1:1"  # nothing listens on port 1: connections are refused at once
UNREACHABLE_DB = f"postgresql+psycopg://postgres@{CLOSED}/ledger"


def ledger(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m cli ARGS`` in ``tmp_path`` with no LEDGER_* variable but ``env`` and a fresh state dir."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    environ |= {"PYTHONPATH": str(ROOT), "LEDGER_STATE_DIR": str(tmp_path / "state"), **env}
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """``bad.json`` (no bundle) and ``plain`` (a regular file where a directory is expected)."""
    (tmp_path / "bad.json").write_text("{}")
    (tmp_path / "plain").write_text("")
    return tmp_path


ENVIRONMENT_ERRORS: list[tuple[list[str], dict[str, str]]] = [
    (["no-such-command"], {}),
    (["replay", "--no-such-option"], {}),
    (["migrate", "--database-url", UNREACHABLE_DB], {}),
    (["serve", "--port", "0"], {"LEDGER_DATABASE_URL": UNREACHABLE_DB}),
    (["serve", "--host", "0.0.0.0"], {}),  # off loopback without a token
    (["up"], {"LEDGER_STATE_DIR": "plain"}),  # a state dir that cannot be created
    (["down"], {"LEDGER_STATE_DIR": "plain"}),
    (["keygen", "--out", "plain/log.key"], {}),
    (["checkpoint"], {"LEDGER_DATABASE_URL": UNREACHABLE_DB}),  # no signing key
    (["prove"], {}),  # neither an entry nor --consistency
    (["prove", "1"], {"LEDGER_DATABASE_URL": UNREACHABLE_DB}),
    (["export-log", "--out", "export"], {"LEDGER_DATABASE_URL": UNREACHABLE_DB}),
    (["verify-log"], {"LEDGER_DATABASE_URL": UNREACHABLE_DB}),
    (["audit-log", "--public-key", "missing.pub", "bad.json"], {}),
    (
        ["consume", "--bootstrap", CLOSED, "--until-idle", "1", "--log-format", "json"],
        {"LEDGER_DATABASE_URL": UNREACHABLE_DB},
    ),
    (["reason-worker", "--once"], {"LEDGER_DATABASE_URL": UNREACHABLE_DB}),
    (["publish", str(SAMPLE)], {"LEDGER_KAFKA_BOOTSTRAP": CLOSED}),  # no broker
    (["publish", "missing.json"], {"LEDGER_KAFKA_BOOTSTRAP": CLOSED}),
    (["audit", "missing.json"], {}),
    (["replay", "--all"], {}),  # nothing running, no URL
    (["verify"], {}),
    (["verify-por", "missing"], {}),
]


@pytest.mark.parametrize(
    ("args", "env"), ENVIRONMENT_ERRORS, ids=[" ".join(args[:2]) for args, _ in ENVIRONMENT_ERRORS]
)
def test_a_usage_or_environment_error_exits_2_without_a_traceback(
    files: Path, args: list[str], env: dict[str, str]
) -> None:
    env = {key: str(files / value) if value == "plain" else value for key, value in env.items()}
    done = ledger(files, *args, **env)
    assert done.returncode == 2, (done.stdout, done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert (done.stderr + done.stdout).strip(), "an error must say what went wrong"


def test_checked_failures_without_a_service_exit_1(files: Path) -> None:
    status = ledger(files, "status")  # what it checks: the background services run
    assert status.returncode == 1 and "ledger up" in status.stdout, status
    health = ledger(
        files, "health", "--database-url", UNREACHABLE_DB, "--bootstrap", CLOSED, "--timeout", "2"
    )
    assert health.returncode == 1 and "UNREACHABLE" in health.stdout, health
    published = ledger(files, "publish", "bad.json", LEDGER_KAFKA_BOOTSTRAP=CLOSED)
    assert published.returncode == 1 and "nothing sent" in published.stderr, published
    audited = ledger(files, "audit", "bad.json")
    assert audited.returncode == 1 and "invalid input" in audited.stderr, audited
    assert ledger(files, "keygen", "--out", "keys/log.key").returncode == 0
    forged = ledger(files, "audit-log", "--public-key", "keys/log.key.pub", "bad.json")
    assert forged.returncode == 1 and "FAIL" in forged.stdout, forged
