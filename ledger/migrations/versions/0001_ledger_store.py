"""Ledger store: raw tables, roles, privileges and append-only triggers.

Revision ID: 0001
Revises:
Create Date: 2026-11-21

Roles are cluster-wide and may be shared by other databases of the cluster, so they are created
idempotently here and never dropped by a downgrade (docs/event-store.md §6).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "ledger_store"


def hex32(column: str) -> str:
    """``0x`` + 64 characters (length and prefix: a regex CHECK per hash costs too much on COPY)."""
    return f"octet_length({column}) = 66 AND {column} LIKE '0x%'"


APPEND_ONLY_TABLES = ("submissions", "entries", "trace_steps", "idempotency_conflicts")
ALL_TABLES = (*APPEND_ONLY_TABLES, "consumer_offsets")

CREATE_ROLES = """
DO $$
DECLARE
    role_name text;
BEGIN
    FOREACH role_name IN ARRAY ARRAY['ledger_owner', 'ledger_writer', 'ledger_reader'] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = role_name) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', role_name);
            EXCEPTION
                WHEN duplicate_object OR unique_violation THEN
                    NULL;  -- created meanwhile by a migration of another database in this cluster
                WHEN insufficient_privilege THEN
                    RAISE EXCEPTION 'cannot create role %: ask an administrator to run '
                        '"CREATE ROLE % NOLOGIN" (and the other ledger roles), then migrate again',
                        role_name, role_name;
            END;
        END IF;
    END LOOP;
    IF NOT pg_has_role(current_user, 'ledger_owner', 'MEMBER') THEN
        EXECUTE format('GRANT ledger_owner TO %I', current_user);
    END IF;
END
$$;
"""

REFUSE_MUTATION = f"""
CREATE FUNCTION {S}.refuse_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%.% is append-only: % refused', TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP
        USING HINT = 'ledger rows are never changed; append a new entry instead';
END
$$;
"""

OFFSETS_FORWARD_ONLY = f"""
CREATE FUNCTION {S}.consumer_offsets_forward_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION '%.% is forward-only: DELETE refused', TG_TABLE_SCHEMA, TG_TABLE_NAME;
    END IF;
    IF (NEW.consumer_group, NEW.topic, NEW.kafka_partition)
            IS DISTINCT FROM (OLD.consumer_group, OLD.topic, OLD.kafka_partition) THEN
        RAISE EXCEPTION '%.% is forward-only: its key cannot change', TG_TABLE_SCHEMA, TG_TABLE_NAME;
    END IF;
    IF NEW.next_offset < OLD.next_offset THEN
        RAISE EXCEPTION '%.% is forward-only: next_offset % -> % refused',
            TG_TABLE_SCHEMA, TG_TABLE_NAME, OLD.next_offset, NEW.next_offset;
    END IF;
    RETURN NEW;
END
$$;
"""


def _create_tables() -> None:
    op.create_table(
        "submissions",
        sa.Column("submission_id", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=False),
        sa.Column("market_id", sa.Text(), nullable=True),
        sa.Column("bundle_id", sa.Text(), nullable=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("input_hashes_canonical", sa.Text(), nullable=False),
        sa.Column(
            "input_hashes",
            postgresql.JSONB(astext_type=sa.Text()),
            sa.Computed("(input_hashes_canonical)::jsonb", persisted=True),
            nullable=False,
        ),
        sa.Column("engine_version", sa.Text(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("kafka_topic", sa.Text(), nullable=True),
        sa.Column("kafka_partition", sa.Integer(), nullable=True),
        sa.Column("kafka_offset", sa.BigInteger(), nullable=True),
        sa.Column("host", sa.Text(), nullable=True),
        sa.Column("appended_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("status IN ('audited', 'rejected')", name=op.f("ck_submissions_status")),
        sa.CheckConstraint(hex32("submission_id"), name=op.f("ck_submissions_submission_id_hex")),
        sa.PrimaryKeyConstraint("submission_id", name=op.f("pk_submissions")),
        sa.UniqueConstraint("idempotency_key", name=op.f("uq_submissions_idempotency_key")),
        schema=S,
    )
    op.create_index(op.f("ix_submissions_market_id"), "submissions", ["market_id"], schema=S)
    op.create_table(
        "entries",
        sa.Column("global_seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("submission_id", sa.Text(), nullable=False),
        sa.Column("stream_seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("payload_canonical", sa.Text(), nullable=False),
        sa.Column(
            "payload",
            postgresql.JSONB(astext_type=sa.Text()),
            sa.Computed("(payload_canonical)::jsonb", persisted=True),
            nullable=False,
        ),
        sa.Column("payload_hash", sa.Text(), nullable=False),
        sa.Column("prev_hash", sa.Text(), nullable=False),
        sa.Column("entry_hash", sa.Text(), nullable=False),
        sa.Column("engine_version", sa.Text(), nullable=False),
        sa.Column("appended_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(hex32("entry_hash"), name=op.f("ck_entries_entry_hash_hex")),
        sa.CheckConstraint(
            "kind IN ('submission.received', 'trace.step', 'audit.completed', 'reasoning.verified', "
            "'verdict.issued', 'submission.rejected', 'replay.verified')",
            name=op.f("ck_entries_kind"),
        ),
        sa.CheckConstraint(hex32("payload_hash"), name=op.f("ck_entries_payload_hash_hex")),
        sa.CheckConstraint(hex32("prev_hash"), name=op.f("ck_entries_prev_hash_hex")),
        sa.CheckConstraint("global_seq > 0", name=op.f("ck_entries_global_seq_positive")),
        sa.CheckConstraint("stream_seq > 0", name=op.f("ck_entries_stream_seq_positive")),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            [f"{S}.submissions.submission_id"],
            name=op.f("fk_entries_submission_id_submissions"),
        ),
        sa.PrimaryKeyConstraint("global_seq", name=op.f("pk_entries")),
        sa.UniqueConstraint("submission_id", "stream_seq", name=op.f("uq_entries_submission_id_stream_seq")),
        schema=S,
    )
    op.create_index(
        "ix_entries_kind_global_seq",
        "entries",
        ["kind", "global_seq"],
        schema=S,
        postgresql_where=sa.text("kind <> 'trace.step'"),
    )
    op.create_table(
        "trace_steps",
        sa.Column("submission_id", sa.Text(), nullable=False),
        sa.Column("step_index", sa.Integer(), nullable=False),
        sa.Column("global_seq", sa.BigInteger(), nullable=False),
        sa.Column("step_id", sa.Text(), nullable=False),
        sa.Column("step_type", sa.Text(), nullable=False),
        sa.Column("evidence_ids", sa.ARRAY(sa.Text()), nullable=False),
        sa.Column("step_hash", sa.Text(), nullable=False),
        sa.Column("canonical_step", sa.Text(), nullable=False),
        sa.CheckConstraint(hex32("step_hash"), name=op.f("ck_trace_steps_step_hash_hex")),
        sa.CheckConstraint("step_index >= 0", name=op.f("ck_trace_steps_step_index_nonnegative")),
        sa.PrimaryKeyConstraint("submission_id", "step_index", name=op.f("pk_trace_steps")),
        sa.UniqueConstraint("global_seq", name=op.f("uq_trace_steps_global_seq")),
        schema=S,
    )
    op.create_table(
        "consumer_offsets",
        sa.Column("consumer_group", sa.Text(), nullable=False),
        sa.Column("topic", sa.Text(), nullable=False),
        sa.Column("kafka_partition", sa.Integer(), nullable=False),
        sa.Column("next_offset", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("next_offset >= 0", name=op.f("ck_consumer_offsets_next_offset_nonnegative")),
        sa.PrimaryKeyConstraint(
            "consumer_group", "topic", "kafka_partition", name=op.f("pk_consumer_offsets")
        ),
        schema=S,
    )
    op.create_table(
        "idempotency_conflicts",
        sa.Column("conflict_id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=False),
        sa.Column("submission_id", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("offered_submission_id", sa.Text(), nullable=False),
        sa.Column("offered_header", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("offered_entries", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("offered_engine_version", sa.Text(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("kafka_topic", sa.Text(), nullable=True),
        sa.Column("kafka_partition", sa.Integer(), nullable=True),
        sa.Column("kafka_offset", sa.BigInteger(), nullable=True),
        sa.Column("host", sa.Text(), nullable=True),
        sa.Column("detected_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "reason IN ('input_hashes_differ', 'header_differs', 'entries_differ')",
            name=op.f("ck_idempotency_conflicts_reason"),
        ),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            [f"{S}.submissions.submission_id"],
            name=op.f("fk_idempotency_conflicts_submission_id_submissions"),
        ),
        sa.PrimaryKeyConstraint("conflict_id", name=op.f("pk_idempotency_conflicts")),
        schema=S,
    )
    op.create_index(
        op.f("ix_idempotency_conflicts_idempotency_key"),
        "idempotency_conflicts",
        ["idempotency_key"],
        schema=S,
    )


def _create_triggers() -> None:
    op.execute(REFUSE_MUTATION)
    op.execute(OFFSETS_FORWARD_ONLY)
    for table in APPEND_ONLY_TABLES:
        op.execute(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {S}.{table} "
            f"FOR EACH ROW EXECUTE FUNCTION {S}.refuse_mutation()"
        )
    for table in ALL_TABLES:
        op.execute(
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {S}.{table} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {S}.refuse_mutation()"
        )
    op.execute(
        f"CREATE TRIGGER consumer_offsets_forward_only BEFORE UPDATE OR DELETE ON {S}.consumer_offsets "
        f"FOR EACH ROW EXECUTE FUNCTION {S}.consumer_offsets_forward_only()"
    )


def _grant() -> None:
    tables = ", ".join(f"{S}.{table}" for table in ALL_TABLES)
    appendable = ", ".join(f"{S}.{table}" for table in APPEND_ONLY_TABLES)
    op.execute(
        "DO $$ BEGIN EXECUTE format('GRANT CONNECT ON DATABASE %I TO ledger_owner, ledger_writer, "
        "ledger_reader', current_database()); END $$"
    )
    op.execute(f"ALTER SCHEMA {S} OWNER TO ledger_owner")
    for table in ALL_TABLES:
        op.execute(f"ALTER TABLE {S}.{table} OWNER TO ledger_owner")
    op.execute(f"ALTER FUNCTION {S}.refuse_mutation() OWNER TO ledger_owner")
    op.execute(f"ALTER FUNCTION {S}.consumer_offsets_forward_only() OWNER TO ledger_owner")
    op.execute(f"REVOKE ALL ON SCHEMA {S} FROM PUBLIC")
    op.execute(f"REVOKE ALL ON {tables} FROM PUBLIC")
    op.execute(f"GRANT USAGE ON SCHEMA {S} TO ledger_writer, ledger_reader")
    op.execute(f"REVOKE ALL ON {tables} FROM ledger_writer, ledger_reader")
    op.execute(f"GRANT SELECT, INSERT ON {appendable} TO ledger_writer")
    op.execute(f"GRANT SELECT, INSERT ON {S}.consumer_offsets TO ledger_writer")
    op.execute(f"GRANT UPDATE (next_offset, updated_at) ON {S}.consumer_offsets TO ledger_writer")
    op.execute(f"GRANT SELECT ON {tables} TO ledger_reader")


def upgrade() -> None:
    """Roles, schema ``ledger_store``, tables, triggers, ownership and grants."""
    op.execute(CREATE_ROLES)
    op.execute(f"CREATE SCHEMA {S}")
    _create_tables()
    _create_triggers()
    _grant()


def downgrade() -> None:
    """Drop the schema and this database's grants; the cluster-wide roles stay."""
    op.execute(f"DROP SCHEMA {S} CASCADE")
    op.execute(
        "DO $$ BEGIN EXECUTE format('REVOKE ALL ON DATABASE %I FROM ledger_owner, ledger_writer, "
        "ledger_reader', current_database()); END $$"
    )
