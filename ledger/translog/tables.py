"""Tables of the transparency log, in schema ``ledger_store`` beside the entries.

* ``merkle_nodes(level, idx, hash)``: every *perfect* subtree of the RFC 6962 tree, written once
  when its last leaf is appended and never changed. Node ``(level, idx)`` covers leaves
  ``[idx * 2**level, (idx + 1) * 2**level)``; level 0 holds the leaf hashes. The tree size is
  ``max(idx) + 1`` at level 0. Roots and proofs of any size up to the tree size need only
  O(log n) of these rows.
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

__all__ = ["CHECKPOINTS", "NODES", "merkle_checkpoints", "merkle_nodes"]

NODES = f"{STORE_SCHEMA}.merkle_nodes"
CHECKPOINTS = f"{STORE_SCHEMA}.merkle_checkpoints"

merkle_nodes = Table(
    "merkle_nodes",
    metadata,
    Column("level", SmallInteger, nullable=False),
    Column("idx", BigInteger, nullable=False),
    Column("hash", LargeBinary, nullable=False),
    PrimaryKeyConstraint("level", "idx"),
    CheckConstraint("level BETWEEN 0 AND 62", name="level_range"),
    CheckConstraint("idx >= 0", name="idx_nonnegative"),
    CheckConstraint("octet_length(hash) = 32", name="hash_length"),
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
