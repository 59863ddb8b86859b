"""Fixtures for the ledger's integration tests: a migrated database per test and a store on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ledger.migration import upgrade
from ledger.store.ledger_store import LedgerStore


@pytest.fixture
def migrated_database_url(database_url: str) -> str:
    """``database_url`` (a fresh database, dropped afterwards) upgraded to the head revision."""
    upgrade(database_url)
    return database_url


@pytest.fixture
def ledger_store(migrated_database_url: str) -> Iterator[LedgerStore]:
    """A :class:`LedgerStore` on the migrated database (pool disposed afterwards)."""
    store = LedgerStore(migrated_database_url)
    try:
        yield store
    finally:
        store.close()
