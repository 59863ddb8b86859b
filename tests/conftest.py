"""Shared pytest configuration: the service fixtures (PostgreSQL, broker, Redis)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["tests.helpers.services"]


@pytest.fixture(autouse=True, scope="session")
def private_state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point XDG_STATE_HOME at a temporary directory: no test touches the user's ~/.local/state/ledger."""
    previous = os.environ.get("XDG_STATE_HOME")
    home = tmp_path_factory.mktemp("xdg-state-home")
    os.environ["XDG_STATE_HOME"] = str(home)
    yield home
    if previous is None:
        os.environ.pop("XDG_STATE_HOME", None)
    else:
        os.environ["XDG_STATE_HOME"] = previous
