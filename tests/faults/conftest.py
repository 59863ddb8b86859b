"""Fixtures of the fault tests: a reproducible seed per test (``LEDGER_FAULT_SEED`` replays one)."""

from __future__ import annotations

import pytest

from tests.helpers.faults import new_seed


@pytest.fixture
def seed() -> int:
    """The seed of this test's random fault points; failure messages include it."""
    return new_seed()
