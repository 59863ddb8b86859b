"""Merkle tiles written with their hashes as a binary ``bytea[]`` parameter (``%(hashes)b``).

Through a SQLAlchemy connection and a psycopg connection (and cursor), in batches that end at,
before and after tile boundaries (255, 256, 257 leaves; a batch filling a level-1 tile's first
slots), every stored tile holds exactly the reference hashes (level 0: the leaves; level 1: the
roots of each 256 leaves), partial tiles are widened in place, and roots and proofs at every size
reached agree with the reference computation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine

from engine.merkle.rfc6962 import consistency_proof, inclusion_proof, root_from_leaf_hashes
from ledger.connect import libpq_url
from ledger.translog.db import run
from ledger.translog.tiles import TILE_WIDTH, misplaced_tiles
from ledger.translog.tree import consistency_proof_at, extend_tree, inclusion_proof_at, root_at

pytestmark = pytest.mark.integration

BATCHES = [1, 254, 1, 1, 255, 2, 253, 1, 256, 257, 1]  # sizes 1, 255, 256, 257, 512, 514, 767, 768, ...


def _leaves(n: int) -> list[bytes]:
    return [hashlib.sha256(b"attack15-%d" % i).digest() for i in range(n)]


def _tiles(db: Any) -> dict[tuple[int, int], tuple[int, bytes]]:
    rows = run(db, "SELECT level, idx, width, hashes FROM ledger_store.merkle_tiles ORDER BY level, idx")
    return {(int(r[0]), int(r[1])): (int(r[2]), bytes(r[3])) for r in rows}


def _expected(leaves: list[bytes]) -> dict[tuple[int, int], tuple[int, bytes]]:
    out: dict[tuple[int, int], tuple[int, bytes]] = {}
    level1 = [
        root_from_leaf_hashes(leaves[i : i + TILE_WIDTH]) for i in range(0, len(leaves) - 255, TILE_WIDTH)
    ]
    for level, hashes in ((0, leaves), (1, level1)):
        for idx in range(0, -(-len(hashes) // TILE_WIDTH)):
            chunk = hashes[idx * TILE_WIDTH : (idx + 1) * TILE_WIDTH]
            out[(level, idx)] = (len(chunk), b"".join(chunk))
    return out


def _grow(db: Any, commit: Callable[[], None]) -> None:
    leaves = _leaves(sum(BATCHES))
    size = 0
    for batch in BATCHES:
        extend_tree(db, leaves[size : size + batch], size)
        commit()
        size += batch
        assert _tiles(db) == _expected(leaves[:size]), size
        assert misplaced_tiles(db, size) == []
        assert root_at(db, size) == root_from_leaf_hashes(leaves[:size])
        for index in {0, size // 2, size - 1}:
            assert inclusion_proof_at(db, index, size) == inclusion_proof(leaves[:size], index)
        for old in {1, 255, 256, 257} & set(range(1, size)):
            assert consistency_proof_at(db, old, size) == consistency_proof(leaves[:size], old, size)


def test_tiles_through_sqlalchemy(engine: Engine) -> None:
    with engine.connect() as conn:
        _grow(conn, conn.commit)


@pytest.mark.parametrize("as_cursor", [False, True])
def test_tiles_through_psycopg(migrated_database_url: str, as_cursor: bool) -> None:
    with psycopg.connect(libpq_url(migrated_database_url)) as conn:
        if as_cursor:
            with conn.cursor() as cur:
                _grow(cur, conn.commit)
        else:
            _grow(conn, conn.commit)
