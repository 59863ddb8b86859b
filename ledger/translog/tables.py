"""Tables of the transparency log, in schema ``ledger_store`` beside the entries.

* ``merkle_tiles(level, idx, width, hashes)``: the RFC 6962 tree as C2SP ``tlog-tiles`` hash
  tiles (:mod:`ledger.translog.tiles`). Tile ``(L, N)`` holds ``width`` concatenated hashes of tree
  level ``8 * L``, nodes ``256 * N ..``; a full tile (width 256) never changes, the partial
  rightmost tile of each level only grows (trigger ``merkle_tiles_extend_only``). The tree size is
  ``256 * idx + width`` of the last level-0 tile. Roots and proofs of any size up to the tree size
  need a few slices of O(log n / 8) tiles.
* ``merkle_checkpoints``: every signed checkpoint, with the signed note verbatim. The signing key
  is never stored; the public key is not either (an auditor must get it from elsewhere).

Registered on the store's :data:`ledger.store.models.metadata` so the autogenerate comparison sees them.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Identity,
    Index,
    LargeBinary,
    PrimaryKeyConstraint,
    SmallInteger,
    Table,
    Text,
    func,
)

from ledger.store.models import STORE_SCHEMA, metadata

__all__ = ["CHECKPOINTS", "TILES", "merkle_checkpoints", "merkle_tiles"]

TILES = f"{STORE_SCHEMA}.merkle_tiles"
CHECKPOINTS = f"{STORE_SCHEMA}.merkle_checkpoints"

merkle_tiles = Table(
    "merkle_tiles",
    metadata,
    Column("level", SmallInteger, nullable=False),
    Column("idx", BigInteger, nullable=False),
    Column("width", SmallInteger, nullable=False),
    Column("hashes", LargeBinary, nullable=False),
    PrimaryKeyConstraint("level", "idx"),
    CheckConstraint("level BETWEEN 0 AND 7", name="level_range"),
    CheckConstraint("idx >= 0", name="idx_nonnegative"),
    CheckConstraint("width BETWEEN 1 AND 256", name="width_range"),
    CheckConstraint("octet_length(hashes) = 32 * width", name="hashes_length"),
    schema=STORE_SCHEMA,
)

merkle_checkpoints = Table(
    "merkle_checkpoints",
    metadata,
    Column("checkpoint_id", BigInteger, Identity(always=True), primary_key=True),
    Column("origin", Text, nullable=False),
    Column("tree_size", BigInteger, nullable=False),
    Column("root_hash", LargeBinary, nullable=False),
    Column("signed_at", DateTime(timezone=True), nullable=False),
    Column("key_id", Text, nullable=False),
    Column("note", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), server_default=func.now(), nullable=False),
    CheckConstraint("tree_size >= 0", name="tree_size_nonnegative"),
    CheckConstraint("octet_length(root_hash) = 32", name="root_hash_length"),
    CheckConstraint("key_id ~ '^[0-9a-f]{8}$'", name="key_id_hex"),
    Index("ix_merkle_checkpoints_tree_size", "tree_size"),
    schema=STORE_SCHEMA,
)
