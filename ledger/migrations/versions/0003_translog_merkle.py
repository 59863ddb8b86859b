"""Transparency log: stored RFC 6962 subtrees and signed checkpoints (docs/transparency-log.md).

Revision ID: 0003_translog
Revises: 0002
Create Date: 2026-11-21

Both tables are append-only like the entries (the store's ``refuse_mutation`` trigger), owned by
``ledger_owner``; the writer may only insert and read. ``ledger.log_checkpoints`` is the SQL view.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_translog"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "ledger_store"
V = "ledger"
TABLES = ("merkle_nodes", "merkle_checkpoints")

CHECKPOINTS_VIEW = f"""
CREATE VIEW {V}.log_checkpoints AS
SELECT c.checkpoint_id, c.origin, c.tree_size, '0x' || encode(c.root_hash, 'hex') AS root_hash,
       c.signed_at, c.key_id, c.note, c.created_at
FROM {S}.merkle_checkpoints c
"""


def upgrade() -> None:
    """Create ``merkle_nodes``, ``merkle_checkpoints``, their triggers, grants and the view."""
    op.create_table(
        "merkle_nodes",
        sa.Column("level", sa.SmallInteger(), nullable=False),
        sa.Column("idx", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.LargeBinary(), nullable=False),
        sa.CheckConstraint("level BETWEEN 0 AND 62", name=op.f("ck_merkle_nodes_level_range")),
        sa.CheckConstraint("idx >= 0", name=op.f("ck_merkle_nodes_idx_nonnegative")),
        sa.CheckConstraint("octet_length(hash) = 32", name=op.f("ck_merkle_nodes_hash_length")),
        sa.PrimaryKeyConstraint("level", "idx", name=op.f("pk_merkle_nodes")),
        schema=S,
    )
    op.create_table(
        "merkle_checkpoints",
        sa.Column("checkpoint_id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("origin", sa.Text(), nullable=False),
        sa.Column("tree_size", sa.BigInteger(), nullable=False),
        sa.Column("root_hash", sa.LargeBinary(), nullable=False),
        sa.Column("signed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("key_id", sa.Text(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("tree_size >= 0", name=op.f("ck_merkle_checkpoints_tree_size_nonnegative")),
        sa.CheckConstraint(
            "octet_length(root_hash) = 32", name=op.f("ck_merkle_checkpoints_root_hash_length")
        ),
        sa.CheckConstraint("key_id ~ '^[0-9a-f]{8}$'", name=op.f("ck_merkle_checkpoints_key_id_hex")),
        sa.PrimaryKeyConstraint("checkpoint_id", name=op.f("pk_merkle_checkpoints")),
        schema=S,
    )
    op.create_index("ix_merkle_checkpoints_tree_size", "merkle_checkpoints", ["tree_size"], schema=S)
    for table in TABLES:
        op.execute(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {S}.{table} "
            f"FOR EACH ROW EXECUTE FUNCTION {S}.refuse_mutation()"
        )
        op.execute(
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {S}.{table} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {S}.refuse_mutation()"
        )
        op.execute(f"ALTER TABLE {S}.{table} OWNER TO ledger_owner")
        op.execute(f"REVOKE ALL ON {S}.{table} FROM PUBLIC, ledger_writer, ledger_reader")
        op.execute(f"GRANT SELECT, INSERT ON {S}.{table} TO ledger_writer")
        op.execute(f"GRANT SELECT ON {S}.{table} TO ledger_reader")
    op.execute(CHECKPOINTS_VIEW)
    op.execute(f"ALTER VIEW {V}.log_checkpoints OWNER TO ledger_owner")
    op.execute(f"GRANT SELECT ON {V}.log_checkpoints TO ledger_reader, ledger_writer")


def downgrade() -> None:
    """Drop the view and both tables (their triggers go with them)."""
    op.execute(f"DROP VIEW {V}.log_checkpoints")
    op.drop_table("merkle_checkpoints", schema=S)
    op.drop_table("merkle_nodes", schema=S)
