"""Source-log incarnations and dead-letter coordinates.

Revision ID: 0004
Revises: 0003_translog
Create Date: 2026-11-24

* ``source_incarnations``: one append-only row per log a consumer group consumed a topic from,
  identified by the broker's cluster id and the topic's id (docs/event-store.md §4). A new row and
  the reset of the group's offsets to 0 are written in one transaction.
* ``consumer_offsets.incarnation``: the incarnation an offset belongs to. The forward-only trigger
  lets ``next_offset`` move back only together with a move to a newer incarnation.
* ``dead_letters``: where each rejection's dead-letter copy landed (operational, not hashed: a
  re-delivered rejection keeps the same committed payload).
* Views: ``ledger.source_incarnations`` (new); ``ledger.rejections`` reads the dead-letter
  coordinates from ``dead_letters``; ``ledger.consumer_offsets`` gains ``incarnation`` at the end.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003_translog"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "ledger_store"
V = "ledger"
TABLES = ("source_incarnations", "dead_letters")
REASONS = "('first', 'legacy_offsets', 'cluster_changed', 'topic_recreated')"

OFFSETS_FORWARD_ONLY = f"""
CREATE OR REPLACE FUNCTION {S}.consumer_offsets_forward_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION '%.% is forward-only: DELETE refused', TG_TABLE_SCHEMA, TG_TABLE_NAME;
    END IF;
    IF (NEW.consumer_group, NEW.topic, NEW.kafka_partition)
            IS DISTINCT FROM (OLD.consumer_group, OLD.topic, OLD.kafka_partition) THEN
        RAISE EXCEPTION '%.% is forward-only: its key cannot change', TG_TABLE_SCHEMA, TG_TABLE_NAME;
    END IF;
    IF OLD.incarnation IS NOT NULL AND (NEW.incarnation IS NULL OR NEW.incarnation < OLD.incarnation) THEN
        RAISE EXCEPTION '%.% is forward-only: incarnation % -> % refused',
            TG_TABLE_SCHEMA, TG_TABLE_NAME, OLD.incarnation, NEW.incarnation;
    END IF;
    -- A new incarnation of the source log starts again from its first offset.
    IF NEW.next_offset < OLD.next_offset
            AND NOT (NEW.incarnation IS NOT NULL AND NEW.incarnation > coalesce(OLD.incarnation, 0)) THEN
        RAISE EXCEPTION '%.% is forward-only: next_offset % -> % refused',
            TG_TABLE_SCHEMA, TG_TABLE_NAME, OLD.next_offset, NEW.next_offset;
    END IF;
    RETURN NEW;
END
$$;
"""

OFFSETS_FORWARD_ONLY_0001 = f"""
CREATE OR REPLACE FUNCTION {S}.consumer_offsets_forward_only() RETURNS trigger LANGUAGE plpgsql AS $$
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

# A partition first seen after an incarnation was recorded belongs to the current incarnation.
OFFSETS_INCARNATION_DEFAULT = f"""
CREATE FUNCTION {S}.consumer_offsets_current_incarnation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.incarnation IS NULL THEN
        NEW.incarnation := (SELECT max(i.incarnation) FROM {S}.source_incarnations i
                             WHERE i.consumer_group = NEW.consumer_group AND i.topic = NEW.topic);
    END IF;
    RETURN NEW;
END
$$;
"""

REJECTIONS_SELECT = """
SELECT e.global_seq, e.submission_id, s.idempotency_key, s.market_id, s.bundle_id,
       e.payload ->> 'reason_code' AS reason_code,
       e.payload ->> 'message' AS message,
       e.payload ->> 'field_path' AS field_path,
       {S}.json_bigint(e.payload -> 'raw_size') AS raw_size,
       e.payload ->> 'raw_sha256' AS raw_sha256,
       e.payload ->> 'raw_base64' AS raw_base64,
       {topic} AS dlq_topic,
       {partition} AS dlq_partition,
       {offset} AS dlq_offset,
       s.kafka_topic, s.kafka_partition, s.kafka_offset, s.host,
       e.payload, e.payload_hash, e.entry_hash, e.engine_version, s.received_at, e.appended_at
  FROM {S}.entries e
  JOIN {S}.submissions s ON s.submission_id = e.submission_id{join}
 WHERE e.kind = 'submission.rejected'"""

REJECTIONS_0002 = REJECTIONS_SELECT.format(
    S=S,
    topic="e.payload -> 'dlq' ->> 'topic'",
    partition=f"{S}.json_bigint(e.payload -> 'dlq' -> 'partition')::integer",
    offset=f"{S}.json_bigint(e.payload -> 'dlq' -> 'offset')",
    join="",
)
REJECTIONS_0004 = REJECTIONS_SELECT.format(
    S=S,
    topic="coalesce(e.payload -> 'dlq' ->> 'topic', d.dlq_topic)",
    partition=f"coalesce({S}.json_bigint(e.payload -> 'dlq' -> 'partition')::integer, d.dlq_partition)",
    offset=f"coalesce({S}.json_bigint(e.payload -> 'dlq' -> 'offset'), d.dlq_offset)",
    join=f"\n  LEFT JOIN {S}.dead_letters d ON d.submission_id = e.submission_id",
)
OFFSETS_0002 = f"""
SELECT o.consumer_group, o.topic, o.kafka_partition, o.next_offset, o.updated_at
  FROM {S}.consumer_offsets o"""
OFFSETS_0004 = f"""
SELECT o.consumer_group, o.topic, o.kafka_partition, o.next_offset, o.updated_at, o.incarnation
  FROM {S}.consumer_offsets o"""
INCARNATIONS_VIEW = f"""
SELECT i.consumer_group, i.topic, i.incarnation, i.cluster_id, i.topic_id, i.reason,
       i.previous_offsets, i.host, i.detected_at
  FROM {S}.source_incarnations i"""


def _create_tables() -> None:
    op.create_table(
        "source_incarnations",
        sa.Column("consumer_group", sa.Text(), nullable=False),
        sa.Column("topic", sa.Text(), nullable=False),
        sa.Column("incarnation", sa.Integer(), nullable=False),
        sa.Column("cluster_id", sa.Text(), nullable=False),
        sa.Column("topic_id", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("previous_offsets", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("host", sa.Text(), nullable=True),
        sa.Column("detected_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("incarnation > 0", name=op.f("ck_source_incarnations_incarnation_positive")),
        sa.CheckConstraint(f"reason IN {REASONS}", name=op.f("ck_source_incarnations_reason")),
        sa.PrimaryKeyConstraint("consumer_group", "topic", "incarnation", name=op.f("pk_source_incarnations")),
        sa.UniqueConstraint(
            "consumer_group",
            "topic",
            "cluster_id",
            "topic_id",
            name=op.f("uq_source_incarnations_consumer_group_topic_cluster_id_topic_id"),
        ),
        schema=S,
    )
    op.create_table(
        "dead_letters",
        sa.Column("submission_id", sa.Text(), nullable=False),
        sa.Column("dlq_topic", sa.Text(), nullable=False),
        sa.Column("dlq_partition", sa.Integer(), nullable=False),
        sa.Column("dlq_offset", sa.BigInteger(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            [f"{S}.submissions.submission_id"],
            name=op.f("fk_dead_letters_submission_id_submissions"),
        ),
        sa.PrimaryKeyConstraint("submission_id", name=op.f("pk_dead_letters")),
        schema=S,
    )


def upgrade() -> None:
    """Tables, the offsets' incarnation column and triggers, grants, views."""
    _create_tables()
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
    op.add_column("consumer_offsets", sa.Column("incarnation", sa.Integer(), nullable=True), schema=S)
    op.execute(OFFSETS_FORWARD_ONLY)
    op.execute(OFFSETS_INCARNATION_DEFAULT)
    op.execute(f"ALTER FUNCTION {S}.consumer_offsets_current_incarnation() OWNER TO ledger_owner")
    op.execute(
        f"CREATE TRIGGER consumer_offsets_current_incarnation BEFORE INSERT ON {S}.consumer_offsets "
        f"FOR EACH ROW EXECUTE FUNCTION {S}.consumer_offsets_current_incarnation()"
    )
    op.execute(f"GRANT UPDATE (incarnation) ON {S}.consumer_offsets TO ledger_writer")
    op.execute(f"CREATE OR REPLACE VIEW {V}.rejections AS {REJECTIONS_0004}")
    op.execute(f"CREATE OR REPLACE VIEW {V}.consumer_offsets AS {OFFSETS_0004}")
    op.execute(f"CREATE VIEW {V}.source_incarnations AS {INCARNATIONS_VIEW}")
    op.execute(f"ALTER VIEW {V}.source_incarnations OWNER TO ledger_owner")
    op.execute(f"GRANT SELECT ON {V}.source_incarnations TO ledger_reader, ledger_writer")


def downgrade() -> None:
    """Back to 0003: the views, trigger and column of 0001/0002; both tables are dropped."""
    op.execute(f"DROP VIEW {V}.source_incarnations")
    op.execute(f"DROP VIEW {V}.consumer_offsets")
    op.execute(f"CREATE VIEW {V}.consumer_offsets AS {OFFSETS_0002}")
    op.execute(f"ALTER VIEW {V}.consumer_offsets OWNER TO ledger_owner")
    op.execute(f"GRANT SELECT ON {V}.consumer_offsets TO ledger_reader, ledger_writer")
    op.execute(f"CREATE OR REPLACE VIEW {V}.rejections AS {REJECTIONS_0002}")
    op.execute(f"DROP TRIGGER consumer_offsets_current_incarnation ON {S}.consumer_offsets")
    op.execute(f"DROP FUNCTION {S}.consumer_offsets_current_incarnation()")
    op.execute(OFFSETS_FORWARD_ONLY_0001)
    op.drop_column("consumer_offsets", "incarnation", schema=S)
    op.drop_table("dead_letters", schema=S)
    op.drop_table("source_incarnations", schema=S)
