"""Least privilege: a lock readers cannot take, an offset-move journal, readable schema version.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24

* ``ledger_store.append_lock`` (always empty): appends take ``LOCK TABLE … IN EXCLUSIVE MODE`` on
  it instead of a well-known advisory lock key, which any login (a ``ledger_reader`` too) could
  hold to stall every append. Locking it needs table-level UPDATE: granted to ``ledger_writer``
  only. A trigger refuses every row written to it, so the grant buys nothing but the lock.
* ``ledger_store.consumer_offset_moves``: an append-only journal of every ``next_offset`` change,
  written by a ``SECURITY DEFINER`` trigger on ``consumer_offsets`` (the writer may read it but not
  write it, and cannot disable the trigger). ``ledger verify`` checks each forward move against the
  Kafka coordinates stored with submissions and conflicts (indexed here).
* ``alembic_version``: SELECT for ``ledger_writer`` and ``ledger_reader``, so a consumer with a
  writer login can check the schema version at start-up (it never migrates).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "ledger_store"

RECORD_OFFSET_MOVE = f"""
CREATE FUNCTION {S}.record_offset_move() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.next_offset IS DISTINCT FROM OLD.next_offset THEN
        INSERT INTO {S}.consumer_offset_moves
            (consumer_group, topic, kafka_partition, from_offset, to_offset, moved_by)
        VALUES (NEW.consumer_group, NEW.topic, NEW.kafka_partition,
                CASE WHEN TG_OP = 'INSERT' THEN NULL ELSE OLD.next_offset END, NEW.next_offset,
                session_user::text);
    END IF;
    RETURN NULL;
END
$$;
"""


def _alembic_version_grant(action: str) -> None:
    """GRANT/REVOKE SELECT on the version table, wherever Alembic put it (normally ``public``)."""
    op.execute(
        "DO $$ DECLARE version_table regclass := to_regclass('alembic_version'); BEGIN "
        f"IF version_table IS NOT NULL THEN EXECUTE format('{action} SELECT ON %s "
        f"{'TO' if action == 'GRANT' else 'FROM'} ledger_writer, ledger_reader', version_table); END IF; END $$"
    )


def upgrade() -> None:
    """Create the lock table, the offset journal and its trigger, the source indexes and grants."""
    op.create_table("append_lock", sa.Column("holder", sa.Text(), nullable=True), schema=S)
    op.execute(
        f"CREATE TRIGGER append_lock_stays_empty BEFORE INSERT OR UPDATE OR DELETE ON {S}.append_lock "
        f"FOR EACH ROW EXECUTE FUNCTION {S}.refuse_mutation()"
    )
    op.execute(
        f"CREATE TRIGGER append_lock_no_truncate BEFORE TRUNCATE ON {S}.append_lock "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {S}.refuse_mutation()"
    )
    op.execute(f"ALTER TABLE {S}.append_lock OWNER TO ledger_owner")
    op.execute(f"REVOKE ALL ON {S}.append_lock FROM PUBLIC, ledger_writer, ledger_reader")
    op.execute(f"GRANT UPDATE ON {S}.append_lock TO ledger_writer")

    op.create_table(
        "consumer_offset_moves",
        sa.Column("move_id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("consumer_group", sa.Text(), nullable=False),
        sa.Column("topic", sa.Text(), nullable=False),
        sa.Column("kafka_partition", sa.Integer(), nullable=False),
        sa.Column("from_offset", sa.BigInteger(), nullable=True),
        sa.Column("to_offset", sa.BigInteger(), nullable=False),
        sa.Column("moved_by", sa.Text(), nullable=False),
        sa.Column("moved_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("move_id", name=op.f("pk_consumer_offset_moves")),
        schema=S,
    )
    op.create_index(
        "ix_consumer_offset_moves_group_topic_partition",
        "consumer_offset_moves",
        ["consumer_group", "topic", "kafka_partition", "move_id"],
        schema=S,
    )
    for suffix, op_name in (("append_only", "UPDATE OR DELETE"), ("no_truncate", "TRUNCATE")):
        level = "STATEMENT" if suffix == "no_truncate" else "ROW"
        op.execute(
            f"CREATE TRIGGER consumer_offset_moves_{suffix} BEFORE {op_name} ON {S}.consumer_offset_moves "
            f"FOR EACH {level} EXECUTE FUNCTION {S}.refuse_mutation()"
        )
    op.execute(f"ALTER TABLE {S}.consumer_offset_moves OWNER TO ledger_owner")
    op.execute(f"REVOKE ALL ON {S}.consumer_offset_moves FROM PUBLIC, ledger_writer, ledger_reader")
    op.execute(f"GRANT SELECT ON {S}.consumer_offset_moves TO ledger_writer, ledger_reader")
    op.execute(RECORD_OFFSET_MOVE)
    op.execute(f"ALTER FUNCTION {S}.record_offset_move() OWNER TO ledger_owner")
    op.execute(f"REVOKE ALL ON FUNCTION {S}.record_offset_move() FROM PUBLIC")
    op.execute(
        f"CREATE TRIGGER consumer_offsets_journal AFTER INSERT OR UPDATE ON {S}.consumer_offsets "
        f"FOR EACH ROW EXECUTE FUNCTION {S}.record_offset_move()"
    )
    # Offsets stored before this revision: one baseline move each (from_offset NULL = "from 0").
    op.execute(
        f"INSERT INTO {S}.consumer_offset_moves (consumer_group, topic, kafka_partition, from_offset, "
        f"to_offset, moved_by, moved_at) SELECT consumer_group, topic, kafka_partition, NULL, next_offset, "
        f"'migration 0005 baseline', updated_at FROM {S}.consumer_offsets"
    )
    op.create_index(
        "ix_submissions_source", "submissions", ["kafka_topic", "kafka_partition", "kafka_offset"], schema=S
    )
    op.create_index(
        "ix_idempotency_conflicts_source",
        "idempotency_conflicts",
        ["kafka_topic", "kafka_partition", "kafka_offset"],
        schema=S,
    )
    _alembic_version_grant("GRANT")


def downgrade() -> None:
    """Drop what :func:`upgrade` created (appends then need revision 0003's advisory-lock code)."""
    _alembic_version_grant("REVOKE")
    op.drop_index("ix_idempotency_conflicts_source", table_name="idempotency_conflicts", schema=S)
    op.drop_index("ix_submissions_source", table_name="submissions", schema=S)
    op.execute(f"DROP TRIGGER consumer_offsets_journal ON {S}.consumer_offsets")
    op.execute(f"DROP FUNCTION {S}.record_offset_move()")
    op.drop_table("consumer_offset_moves", schema=S)
    op.drop_table("append_lock", schema=S)
