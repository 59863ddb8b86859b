"""The state directory is per user (XDG), the same from every working directory, unless LEDGER_STATE_DIR."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.settings import LedgerSettings


def test_default_is_xdg_state_home_ledger_whatever_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LEDGER_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    here = LedgerSettings().state_dir
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert LedgerSettings().state_dir == here == tmp_path / "state" / "ledger"


def test_without_xdg_state_home_it_is_under_the_home_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LEDGER_STATE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    for value in (None, "", "relative/ignored"):
        if value is None:
            monkeypatch.delenv("XDG_STATE_HOME", raising=False)
        else:
            monkeypatch.setenv("XDG_STATE_HOME", value)
        assert LedgerSettings().state_dir == tmp_path / ".local" / "state" / "ledger"


def test_ledger_state_dir_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("LEDGER_STATE_DIR", str(tmp_path / "mine"))
    assert LedgerSettings().state_dir == tmp_path / "mine"
