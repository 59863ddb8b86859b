"""Hostile arguments to the commands that need a ledger: one line on stderr, the documented status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.connect import create_ledger_engine
from ledger.store.ledger_store import LedgerStore
from ledger.translog.checkpoints import create_checkpoint
from ledger.translog.keys import generate_key_files, load_private_key
from tests.helpers.ledger_factories import audited
from tests.helpers.replay import ledger

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NOT_UTF8 = "x\udced\udca0\udc80"  # a lone surrogate, as argv carries bytes that are not UTF-8


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["prove", NOT_UTF8], "not UTF-8 text"),
        (["replay-por", "--submission", NOT_UTF8], "not UTF-8 text"),
        (["replay-por", "--market", NOT_UTF8], "not UTF-8 text"),
        (
            ["replay-por", "--submission", "0x" + "ab" * 32],
            "no stored PoR pack",
        ),  # nothing checked: no quiet 0
        (["replay-por", "--market", "no-such-market"], "no stored PoR pack"),
        (["migrate", "--revision", "bogus"], "Can't locate revision"),
        (["migrate", "--downgrade", "bogus"], "Can't locate revision"),
        (["prove", "1", "--out", "."], "cannot write .: Is a directory"),
        (["prove", "--consistency", "0", "1", "--out", "no/such/dir/p.json"], "No such file or directory"),
    ],
)
def test_hostile_arguments_are_usage_errors_in_one_line(
    ledger_store: LedgerStore, migrated_database_url: str, tmp_path: Path, args: list[str], says: str
) -> None:
    ledger_store.append(audited("k1"))
    generate_key_files(tmp_path / "log.key")
    engine = create_ledger_engine(migrated_database_url)
    try:
        create_checkpoint(engine, load_private_key(tmp_path / "log.key"))  # so prove gets to the target
    finally:
        engine.dispose()
    done = ledger(migrated_database_url, *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert says in line


@pytest.mark.parametrize("origin", ["a b", "a+b", NOT_UTF8])
def test_checkpoint_refuses_an_origin_no_note_can_carry(
    migrated_database_url: str, tmp_path: Path, origin: str
) -> None:
    assert ledger(migrated_database_url, "keygen", "--out", f"{tmp_path}/log.key").returncode == 0
    for env in ({}, {"LEDGER_LOG_ORIGIN": origin}):
        args = ["checkpoint", "--key", f"{tmp_path}/log.key"] + ([] if env else ["--origin", origin])
        done = ledger(migrated_database_url, *args, env=env)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert "origin" in line


@pytest.mark.parametrize("args", [["verify-log"], ["verify"], ["replay"]])
def test_a_report_that_cannot_be_written_is_one_line_and_exit_2(
    migrated_database_url: str, args: list[str]
) -> None:
    with Path("/dev/full").open("w") as full:  # every write fails: No space left on device
        done = subprocess.run(
            [sys.executable, "-m", "cli", *args],
            cwd=ROOT,
            env={**os.environ, "LEDGER_DATABASE_URL": migrated_database_url, "PYTHONPATH": str(ROOT)},
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == ["ledger: cannot write the output: No space left on device"]
