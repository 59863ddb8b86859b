"""Fixtures for the ledger's integration tests: a migrated database per test, a store and an
engine on it, and a transparency-log signing key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Engine

from ledger.connect import create_ledger_engine
from ledger.migration import upgrade
from ledger.store.ledger_store import LedgerStore
from ledger.translog.keys import generate_key_files, load_private_key


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


@pytest.fixture
def engine(migrated_database_url: str) -> Iterator[Engine]:
    """A SQLAlchemy engine on the migrated database (disposed afterwards)."""
    engine = create_ledger_engine(migrated_database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def key(tmp_path: Path) -> Ed25519PrivateKey:
    """A fresh Ed25519 checkpoint signing key (files under ``tmp_path``)."""
    generate_key_files(tmp_path / "log.key")
    return load_private_key(tmp_path / "log.key")
