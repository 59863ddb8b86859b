"""Hostile arguments and files against the exit-status convention (0 ok, 1 the checked thing failed,
2 usage or environment error), as real processes: one line on stderr, never a traceback."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.unit.test_cli_exit_status import UNREACHABLE_DB, ledger

NOT_UTF8 = "x\udced\udca0\udc80"  # the bytes b"x\xed\xa0\x80" of a lone surrogate, as argv carries them


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize("origin", ["a b", "", "a+b", NOT_UTF8])
def test_keygen_refuses_an_origin_no_note_can_carry_before_writing_anything(
    tmp_path: Path, origin: str
) -> None:
    done = ledger(tmp_path, "keygen", "--out", "log.key", "--origin", origin)
    assert done.returncode == 2
    assert "origin" in _one_line(done)
    assert not (tmp_path / "log.key").exists() and not (tmp_path / "log.key.pub").exists()


@pytest.mark.parametrize("port", ["99999", "-1", "x"])
def test_serve_refuses_a_port_out_of_range_as_a_usage_error(tmp_path: Path, port: str) -> None:
    done = ledger(tmp_path, "serve", "--port", port, LEDGER_DATABASE_URL=UNREACHABLE_DB)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "invalid tcp_port value" in done.stderr


def test_migrate_on_a_database_that_is_not_postgresql_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = ledger(tmp_path, "migrate", "--database-url", f"sqlite:///{tmp_path}/x.db")
    assert done.returncode == 2
    assert "needs PostgreSQL" in _one_line(done)


@pytest.mark.parametrize("command", ["verify", "verify-log"])
def test_an_exported_checkpoint_that_is_not_text_fails_the_check_naming_the_file(
    tmp_path: Path, command: str
) -> None:
    (tmp_path / "cp.note").write_bytes(b"\xae\x00\xff binary garbage")
    done = ledger(tmp_path, command, "--checkpoint", "cp.note", LEDGER_DATABASE_URL=UNREACHABLE_DB)
    assert done.returncode == 1
    assert "cp.note: not a checkpoint note" in _one_line(done)


@pytest.mark.parametrize("command", ["verify", "verify-log"])
def test_an_exported_checkpoint_that_is_a_directory_is_an_environment_error(
    tmp_path: Path, command: str
) -> None:
    (tmp_path / "cp.note").mkdir()
    done = ledger(tmp_path, command, "--checkpoint", "cp.note", LEDGER_DATABASE_URL=UNREACHABLE_DB)
    assert done.returncode == 2
    assert "cp.note" in _one_line(done)


@pytest.mark.parametrize(
    ("args", "status", "says"),
    [
        (["verify-log", "--checkpoint", "/dev/zero"], 1, "not a checkpoint note (more than"),
        (["verify", "--checkpoint", "/dev/zero"], 1, "not a checkpoint note (more than"),
        (["verify-log", "--public-key", "/dev/zero"], 2, "not a key file"),
        (["checkpoint", "--key", "/dev/zero"], 2, "not a key file"),
        (["audit-log", "--public-key", "/dev/zero", "."], 2, "not a key file"),
    ],
)
def test_a_file_that_never_ends_is_refused_after_a_bounded_read(
    tmp_path: Path, args: list[str], status: int, says: str
) -> None:
    done = ledger(tmp_path, *args, LEDGER_DATABASE_URL=UNREACHABLE_DB)
    assert done.returncode == status
    assert says in _one_line(done)


@pytest.mark.parametrize(
    "args", [["audit", "/dev/zero"], ["publish", "/dev/zero"], ["publish", "--raw", "/dev/zero"]]
)
def test_an_input_that_never_ends_is_oversize_after_a_bounded_read(tmp_path: Path, args: list[str]) -> None:
    done = ledger(tmp_path, *args, LEDGER_KAFKA_BOOTSTRAP="127.0.0.1:1")
    assert done.returncode == 1
    assert (
        "Traceback" not in done.stderr
        and "oversize" in done.stderr
        and "/dev/zero holds more than" in done.stderr
    )


def test_audit_log_names_a_device_as_not_a_regular_file(tmp_path: Path) -> None:
    assert ledger(tmp_path, "keygen", "--out", "k", "--force").returncode == 0
    done = ledger(tmp_path, "audit-log", "--public-key", "k.pub", "/dev/zero")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "FAIL /dev/zero: not a regular file" in done.stdout
