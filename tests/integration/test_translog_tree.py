"""The stored RFC 6962 tree: equal to the reference tree, maintained incrementally, append-only."""

from __future__ import annotations

import hashlib
from typing import Any

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, event, text

import ledger.translog.tables  # noqa: F401  (registers the tables on the store's metadata)
from engine.merkle.rfc6962 import consistency_proof, inclusion_proof, root_from_leaf_hashes
from ledger.connect import libpq_url
from ledger.migration import downgrade, include_name, upgrade
from ledger.store.ledger_store import LedgerStore
from ledger.store.models import metadata
from ledger.translog.leaves import entry_leaf_hash
from ledger.translog.tree import (
    TreeError,
    append_entries_to_tree,
    catch_up_tree,
    consistency_at,
    consistency_proof_at,
    extend_tree,
    inclusion_proof_at,
    lock_appends,
    root_at,
    tree_size,
)
from tests.helpers.ledger_factories import audited

pytestmark = pytest.mark.integration


def _append(store: LedgerStore, count: int, prefix: str = "s") -> list[Any]:
    return [
        entry
        for i in range(count)
        for entry in store.append(audited(f"{prefix}{i}", steps=1 + i % 4)).entries
    ]


def _hook(url: str, entries: list[Any], role: str | None = None) -> None:
    """What the store's append transaction does: lock, then extend the tree on its cursor."""
    with psycopg.connect(libpq_url(url)) as conn, conn.transaction(), conn.cursor() as cur:
        if role:
            cur.execute(f"SET LOCAL ROLE {role}")
        lock_appends(cur)
        append_entries_to_tree(cur, entries)


def _forget_tree(url: str) -> None:
    """Simulate a ledger whose entries predate the tree (as a superuser, bypassing the triggers)."""
    with psycopg.connect(libpq_url(url)) as conn, conn.transaction(), conn.cursor() as cur:
        cur.execute("SET LOCAL session_replication_role = replica")
        cur.execute("DELETE FROM ledger_store.merkle_tiles")


def _reference_leaves(entries: list[Any]) -> list[bytes]:
    return [entry_leaf_hash(entry.entry_hash) for entry in entries]


def test_the_append_path_keeps_the_stored_tree_equal_to_the_reference_for_every_size(
    ledger_store: LedgerStore, engine: Engine
) -> None:
    entries = _append(ledger_store, 6)
    leaves = _reference_leaves(entries)
    with engine.begin() as connection:
        assert catch_up_tree(connection) == 0, "the append transaction already extended the tree"
    with engine.connect() as connection:
        assert tree_size(connection) == len(leaves)
        for size in range(len(leaves) + 1):
            assert root_at(connection, size) == root_from_leaf_hashes(leaves[:size])
            for index in range(size):
                assert inclusion_proof_at(connection, index, size) == inclusion_proof(leaves[:size], index)
            for old in range(0, size + 1, 3):
                assert consistency_proof_at(connection, old, size) == consistency_proof(leaves, old, size)
        with pytest.raises(TreeError, match="tree holds"):
            root_at(connection, len(leaves) + 1)


def test_catch_up_rebuilds_a_missing_tree_and_is_idempotent(
    ledger_store: LedgerStore, engine: Engine, migrated_database_url: str
) -> None:
    entries = _append(ledger_store, 2)
    _forget_tree(migrated_database_url)
    with engine.begin() as connection:
        assert catch_up_tree(connection) == len(entries)
    with engine.begin() as connection:
        assert catch_up_tree(connection) == 0
        assert root_at(connection, len(entries)) == root_from_leaf_hashes(_reference_leaves(entries))


def test_appends_as_the_writer_role_extend_the_tree_in_one_partial_tile(
    migrated_database_url: str, engine: Engine
) -> None:
    writer = LedgerStore(migrated_database_url, role="ledger_writer")
    try:
        appended = [entry for i in range(5) for entry in writer.append(audited(f"hook{i}")).entries]
    finally:
        writer.close()
    n = len(appended)
    leaves = _reference_leaves(appended)
    with engine.connect() as connection:
        rows = connection.execute(
            text("SELECT level, idx, width, hashes FROM ledger_store.merkle_tiles")
        ).all()
        assert [tuple(row) for row in rows] == [(0, 0, n, b"".join(leaves))]
        assert root_at(connection, n) == root_from_leaf_hashes(leaves)


def test_the_append_hook_catches_up_first_when_entries_predate_the_tree(
    ledger_store: LedgerStore, engine: Engine, migrated_database_url: str
) -> None:
    earlier = _append(ledger_store, 3)
    _forget_tree(migrated_database_url)
    latest = list(ledger_store.append(audited("late")).entries)
    with engine.connect() as connection:
        leaves = _reference_leaves([*earlier, *latest])
        assert tree_size(connection) == len(leaves)
        assert root_at(connection, len(leaves)) == root_from_leaf_hashes(leaves)


def test_extending_past_entries_already_in_the_tree_is_refused(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    entries = list(ledger_store.append(audited("once")).entries)
    with pytest.raises(TreeError, match="ahead"):
        _hook(migrated_database_url, entries)


def test_merkle_tables_refuse_update_delete_and_truncate(ledger_store: LedgerStore, engine: Engine) -> None:
    _append(ledger_store, 1)
    with engine.begin() as connection:
        catch_up_tree(connection)
    for statement in (
        "DELETE FROM ledger_store.merkle_tiles",
        "TRUNCATE ledger_store.merkle_tiles",
    ):
        with pytest.raises(Exception, match="append-only"), engine.begin() as connection:
            connection.execute(text(statement))
    for statement in (
        "UPDATE ledger_store.merkle_tiles SET hashes = hashes",  # same width
        "UPDATE ledger_store.merkle_tiles SET hashes = substring(hashes FROM 33), width = width - 1",
        "UPDATE ledger_store.merkle_tiles SET hashes = overlay(hashes PLACING sha256(hashes) FROM 1) "
        "|| sha256(hashes), width = width + 1",  # grows, but rewrites the first hash
        "UPDATE ledger_store.merkle_tiles SET idx = idx + 1",
    ):
        with pytest.raises(Exception, match="may only grow"), engine.begin() as connection:
            connection.execute(text(statement))


def test_a_proof_costs_one_indexed_query_after_the_size_probe(
    ledger_store: LedgerStore, engine: Engine
) -> None:
    _append(ledger_store, 4)
    with engine.begin() as connection:
        catch_up_tree(connection)
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    with engine.connect() as connection:
        size = tree_size(connection)
        statements.clear()
        inclusion_proof_at(connection, 3, size)
        consistency_proof_at(connection, 5, size)
    assert len(statements) == 4  # per proof: the size probe, then one fetch of every node it needs


def test_models_and_migration_agree_on_the_log_tables(engine: Engine) -> None:
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"include_schemas": True, "include_name": include_name, "compare_type": True}
        )
        diffs = [diff for diff in compare_metadata(context, metadata) if "merkle" in repr(diff)]
    assert diffs == []


def test_the_migration_downgrades_and_upgrades_again(migrated_database_url: str) -> None:
    downgrade(migrated_database_url, "0002")
    upgrade(migrated_database_url)


def test_tiles_across_tile_and_level_boundaries_match_the_reference_tree(engine: Engine) -> None:
    leaves = [hashlib.sha256(i.to_bytes(4, "big")).digest() for i in range(3 * 256 + 5)]
    batches = [1, 254, 1, 300, 212, 3, 2]  # ends a tile exactly, crosses one, fills the level-1 edge
    assert sum(batches) == len(leaves)
    size = 0
    for count in batches:
        with engine.begin() as connection:
            frontier = extend_tree(connection, leaves[size : size + count], size)
        size += count
        assert frontier.root() == root_from_leaf_hashes(leaves[:size])
    with engine.connect() as connection:
        tiles = connection.execute(
            text("SELECT level, idx, width, hashes FROM ledger_store.merkle_tiles ORDER BY level, idx")
        ).all()
        full = [root_from_leaf_hashes(leaves[i : i + 256]) for i in range(0, 3 * 256, 256)]
        assert [tuple(row) for row in tiles] == [
            (0, 0, 256, b"".join(leaves[:256])),
            (0, 1, 256, b"".join(leaves[256:512])),
            (0, 2, 256, b"".join(leaves[512:768])),
            (0, 3, 5, b"".join(leaves[768:])),
            (1, 0, 3, b"".join(full)),
        ]
        assert tree_size(connection) == len(leaves)
        for old, new in [(0, 773), (1, 256), (255, 257), (256, 512), (300, 771), (511, 773), (773, 773)]:
            assert root_at(connection, new) == root_from_leaf_hashes(leaves[:new])
            assert consistency_proof_at(connection, old, new) == consistency_proof(leaves, old, new)
            assert consistency_at(connection, old, new) == (
                root_from_leaf_hashes(leaves[:old]),
                root_from_leaf_hashes(leaves[:new]),
                consistency_proof(leaves, old, new),
            )
        for index, new in [(0, 773), (255, 256), (256, 600), (767, 768), (772, 773), (400, 512)]:
            assert inclusion_proof_at(connection, index, new) == inclusion_proof(leaves[:new], index)
    with pytest.raises(TreeError, match="ahead"), engine.begin() as connection:
        extend_tree(connection, leaves[:1], 768)
