"""``python -m ledger.translog audit-log``: the verifier runs with no database code at all, reads
notes, bundles and entries by content, and reports failures as lines, never as tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ledger.translog.__main__ import main
from tests.unit.test_translog_audit import ENTRIES, KEY, _consistency, _inclusion, _note

DB_MODULES = (
    "sqlalchemy",
    "psycopg",
    "pydantic_settings",
    "aiokafka",
    "devstack.database",
    "ledger.store.ledger_store",
)


def test_the_verifier_imports_no_database_code() -> None:
    code = (
        "import sys, ledger.translog.__main__, ledger.translog.auditfiles; "
        f"print([m for m in sys.modules if m.startswith({DB_MODULES!r})])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    public = KEY.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    (tmp_path / "log.pub").write_bytes(public)
    files = tmp_path / "log"
    files.mkdir()
    for size in (5, 13):
        (files / f"cp-{size}.note").write_text(_note(size))
    (files / "inclusion.json").write_text(json.dumps([_inclusion(3, 13), _inclusion(12, 13)]))
    (files / "consistency.json").write_text(json.dumps(_consistency(5, 13)))
    (files / "entries.jsonl").write_text("".join(json.dumps(entry) + "\n" for entry in ENTRIES))
    return tmp_path


def _audit(log_dir: Path, *paths: str) -> list[str]:
    return ["audit-log", "--public-key", str(log_dir / "log.pub"), *paths]


def test_a_directory_of_notes_bundles_and_entries_passes(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_audit(log_dir, str(log_dir / "log"))) == 0
    out = capsys.readouterr().out
    assert "audit passed" in out and "13 entries recomputed" in out


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("junk.json", "{not json", "unreadable"),
        ("deep.json", "[" * 100000, "unreadable"),
        ("binary.note", "\x00\xff", "checkpoint rejected"),
        ("other.json", '{"format": "x"}', "unknown bundle format"),
    ],
)
def test_malformed_files_fail_with_a_message_not_a_traceback(
    log_dir: Path, capsys: pytest.CaptureFixture[str], name: str, content: str, expected: str
) -> None:
    (log_dir / "log" / name).write_text(content)
    assert main(_audit(log_dir, str(log_dir / "log"))) == 1
    failures = [line for line in capsys.readouterr().out.splitlines() if line.startswith("FAIL")]
    assert len(failures) == 1 and name in failures[0] and expected in failures[0]


def test_a_missing_file_and_a_bad_key_are_reported(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # neither is a failed check: the audit could not run (exit 2, the usage or environment status)
    assert main(_audit(log_dir, str(log_dir / "nope.note"))) == 2
    assert "no such file" in capsys.readouterr().err
    (log_dir / "bad.pub").write_text("not a key")
    assert main(["audit-log", "--public-key", str(log_dir / "bad.pub"), str(log_dir / "log")]) == 2
    assert "neither a PEM public key" in capsys.readouterr().err
