"""Revision 0007 on a ledger that holds data: tiles -> every node -> tiles, nothing lost or changed."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from engine.merkle.rfc6962 import Frontier
from ledger.connect import create_ledger_engine, libpq_url
from ledger.migration import current_revision, downgrade, upgrade
from ledger.store.ledger_store import LedgerStore
from ledger.translog.checkpoints import create_checkpoint
from ledger.translog.keys import generate_key_files, load_private_key
from ledger.translog.leaves import entry_leaf_hash
from ledger.translog.proving import prove_consistency
from ledger.translog.tree import node_key, root_at
from ledger.translog.verify import verify_checkpoints
from tests.helpers.database import query
from tests.helpers.ledger_factories import audited
from tests.helpers.replay import build_ledger, ledger_json

pytestmark = pytest.mark.integration

TILES = "SELECT level, idx, width, hashes FROM ledger_store.merkle_tiles ORDER BY level, idx"
NODES = "SELECT level, idx, hash FROM ledger_store.merkle_nodes ORDER BY level, idx"


def _rows(url: str, statement: str) -> list[tuple[object, ...]]:
    return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in query(url, statement)]


def _every_perfect_subtree(url: str) -> list[tuple[object, ...]]:
    """What the code before revision 0007 stored: each subtree the appends completed."""
    frontier, nodes = Frontier(), []
    for (value,) in query(url, "SELECT entry_hash FROM ledger_store.entries ORDER BY global_seq"):
        frontier, completed = frontier.append_with_subtrees(entry_leaf_hash(value))
        nodes += [(*node_key(s.start, s.end), s.hash) for s in completed]
    return sorted(nodes)


def test_down_and_up_again_on_a_ledger_with_data_keeps_the_tree_and_its_checkpoints(
    migrated_database_url: str, tmp_path: Path
) -> None:
    url = migrated_database_url
    build_ledger(url, copies=3)
    generate_key_files(tmp_path / "log.key")
    key = load_private_key(tmp_path / "log.key")
    engine = create_ledger_engine(url)
    try:
        signed = create_checkpoint(engine, key)
        assert signed.tree_size > 256  # the tree spans level-0 tiles and a level-1 tile
        tiles = _rows(url, TILES)
        assert len(tiles) == signed.tree_size // 256 + 2

        downgrade(url, "0006")
        nodes = _rows(url, NODES)
        assert nodes == _every_perfect_subtree(url)
        assert len(nodes) == 2 * signed.tree_size - signed.tree_size.bit_count()

        upgrade(url)
        assert _rows(url, TILES) == tiles
        with engine.connect() as connection:
            assert root_at(connection, signed.tree_size) == signed.root_hash
        assert verify_checkpoints(engine, public_key=key.public_key()) == []
        code, report = ledger_json(url, "verify")
        assert code == 0, report["problems"]
        assert report["summary"]["translog_checked"] is True

        with LedgerStore(url) as store:
            assert store.append(audited("after-migration")).status == "created"
        later = create_checkpoint(engine, key)
        with engine.connect() as connection:
            bundle = prove_consistency(connection, signed.tree_size, later.tree_size)
        assert bundle["old_size"] == signed.tree_size and later.tree_size > signed.tree_size
    finally:
        engine.dispose()


def test_the_upgrade_refuses_a_node_table_with_a_missing_leaf(database_url: str) -> None:
    upgrade(database_url, "0006")
    with psycopg.connect(libpq_url(database_url)) as conn:
        for idx in (0, 1, 3):  # leaf 2 is missing
            conn.execute("INSERT INTO ledger_store.merkle_nodes VALUES (0, %s, %s)", (idx, bytes(32)))
    with pytest.raises(RuntimeError, match="merkle_nodes level 0 holds 3 nodes up to idx 3"):
        upgrade(database_url)
    assert current_revision(database_url) == "0006"
