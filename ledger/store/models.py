"""SQLAlchemy models of the raw tables in schema ``ledger_store``.

Alembic migrations (``ledger/migrations/versions``) are the only way the schema changes; these models
mirror them and a test proves there is no autogenerate diff. The stable SQL interface is the set
of views in schema ``ledger`` (created by migration, not modelled here).

Column groups: *committed* columns feed hashes (``payload_canonical``, ``payload_hash``,
``prev_hash``, ``entry_hash``, ...); *operational* columns (``received_at``, ``kafka_*``, ``host``,
``appended_at``) record where and when, and are never hashed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from ledger.store.records import ENTRY_KINDS

STORE_SCHEMA = "ledger_store"
VIEW_SCHEMA = "ledger"

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def hex32_check(column: str) -> str:
    """``0x`` + 64 characters. Length and prefix only: a regex CHECK per hash halved COPY throughput;
    ``ledger verify`` recomputes every hash anyway."""
    return f"octet_length({column}) = 66 AND {column} LIKE '0x%'"


KIND_CHECK = "kind IN (" + ", ".join(f"'{kind}'" for kind in ENTRY_KINDS) + ")"
STEP_BODY_COLUMNS = ("step_index", "step_id", "step_type", "evidence_ids", "step_hash", "canonical_step")
STEP_COLUMNS_CHECK = (
    f"num_nulls({', '.join(STEP_BODY_COLUMNS)}) = "
    f"CASE WHEN kind = 'trace.step' THEN 0 ELSE {len(STEP_BODY_COLUMNS)} END"
)
"""The step body columns are all set on a ``trace.step`` entry and all NULL on any other."""


class Base(DeclarativeBase):
    """Declarative base bound to the ``ledger_store`` schema."""

    metadata = MetaData(schema=STORE_SCHEMA, naming_convention=NAMING_CONVENTION)


class Submission(Base):
    """One submission (a Kafka record's bundle, audited or rejected): the head of one hash chain."""

    __tablename__ = "submissions"
    __table_args__ = (
        CheckConstraint("status IN ('audited', 'rejected', 'por_verified')", name="status"),
        CheckConstraint(hex32_check("submission_id"), name="submission_id_hex"),
        Index(None, "market_id"),
    )

    submission_id: Mapped[str] = mapped_column(Text, primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(Text, unique=True)
    market_id: Mapped[str | None] = mapped_column(Text)
    bundle_id: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)
    input_hashes_canonical: Mapped[str] = mapped_column(Text)
    # no stored input_hashes since revision 0012: the view ledger.submissions parses the text on read
    engine_version: Mapped[str] = mapped_column(Text)
    # operational, not committed
    received_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    kafka_topic: Mapped[str | None] = mapped_column(Text)
    kafka_partition: Mapped[int | None] = mapped_column(Integer)
    kafka_offset: Mapped[int | None] = mapped_column(BigInteger)
    host: Mapped[str | None] = mapped_column(Text)
    appended_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Entry(Base):
    """One ledger entry: gapless ``global_seq``, per-submission ``stream_seq`` and hash chain.

    A ``trace.step`` entry also holds its step body (``step_index`` … ``canonical_step``; NULL on
    every other kind), one row per step since revision 0008: ``ledger_store.trace_steps`` is a view
    of them. No foreign keys on them: the append writes the body with its entry in one row.

    Since revision 0009 the payload is stored once, as ``payload_canonical`` (the hashed text); the
    views of schema ``ledger`` expose ``payload`` as jsonb parsed on read. Since revision 0010 a server
    without lz4 keeps rows up to 8,160 bytes inline and uncompressed (``toast_tuple_target``, set by
    the migration only: no pglz on the append path). That every entry names a
    stored submission is checked once per INSERT/COPY statement by the trigger
    ``entries_submission_exists`` (not modelled here; since revision 0011 one index probe per
    distinct ``submission_id`` of the statement), not by a per-row foreign key.
    """

    __tablename__ = "entries"
    __table_args__ = (
        UniqueConstraint("submission_id", "stream_seq"),
        CheckConstraint("global_seq > 0", name="global_seq_positive"),
        CheckConstraint("stream_seq > 0", name="stream_seq_positive"),
        CheckConstraint(KIND_CHECK, name="kind"),
        CheckConstraint(hex32_check("payload_hash"), name="payload_hash_hex"),
        CheckConstraint(hex32_check("prev_hash"), name="prev_hash_hex"),
        CheckConstraint(hex32_check("entry_hash"), name="entry_hash_hex"),
        Index(
            "ix_entries_kind_global_seq",
            "kind",
            "global_seq",
            postgresql_where=text("kind <> 'trace.step'"),
        ),
        CheckConstraint(STEP_COLUMNS_CHECK, name="step_columns"),
        CheckConstraint("step_index >= 0", name="step_index_nonnegative"),
        CheckConstraint(hex32_check("step_hash"), name="step_hash_hex"),
    )

    global_seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    submission_id: Mapped[str] = mapped_column(Text)
    stream_seq: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(Text)
    payload_canonical: Mapped[str] = mapped_column(Text)
    payload_hash: Mapped[str] = mapped_column(Text)
    prev_hash: Mapped[str] = mapped_column(Text)
    entry_hash: Mapped[str] = mapped_column(Text)
    engine_version: Mapped[str] = mapped_column(Text)
    # operational, not committed
    appended_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    # the step body, on trace.step entries only (committed through step_hash, which the payload holds)
    step_index: Mapped[int | None] = mapped_column(Integer)
    step_id: Mapped[str | None] = mapped_column(Text)
    step_type: Mapped[str | None] = mapped_column(Text)
    evidence_ids: Mapped[list[str] | None] = mapped_column(ARRAY(Text))
    step_hash: Mapped[str | None] = mapped_column(Text)
    canonical_step: Mapped[str | None] = mapped_column(Text)


class ConsumerOffset(Base):
    """The next Kafka offset to consume per (group, topic, partition); moves forward only."""

    __tablename__ = "consumer_offsets"
    __table_args__ = (CheckConstraint("next_offset >= 0", name="next_offset_nonnegative"),)

    consumer_group: Mapped[str] = mapped_column(Text, primary_key=True)
    topic: Mapped[str] = mapped_column(Text, primary_key=True)
    kafka_partition: Mapped[int] = mapped_column(Integer, primary_key=True)
    next_offset: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    incarnation: Mapped[int | None] = mapped_column(Integer)
    """The source-log incarnation the offset belongs to (NULL: written before incarnations existed)."""


class SourceIncarnation(Base):
    """One log a consumer group consumed a topic from: broker cluster id and topic id (append-only)."""

    __tablename__ = "source_incarnations"
    __table_args__ = (
        CheckConstraint("incarnation > 0", name="incarnation_positive"),
        CheckConstraint(
            "reason IN ('first', 'legacy_offsets', 'cluster_changed', 'topic_recreated')", name="reason"
        ),
        UniqueConstraint("consumer_group", "topic", "cluster_id", "topic_id"),
    )

    consumer_group: Mapped[str] = mapped_column(Text, primary_key=True)
    topic: Mapped[str] = mapped_column(Text, primary_key=True)
    incarnation: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    cluster_id: Mapped[str] = mapped_column(Text)
    topic_id: Mapped[str] = mapped_column(Text)
    reason: Mapped[str] = mapped_column(Text)
    previous_offsets: Mapped[dict[str, Any]] = mapped_column(JSONB)
    host: Mapped[str | None] = mapped_column(Text)
    detected_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class DeadLetterRecord(Base):
    """Where a rejection's dead-letter copy landed (operational: never hashed, append-only)."""

    __tablename__ = "dead_letters"

    submission_id: Mapped[str] = mapped_column(
        Text, ForeignKey(f"{STORE_SCHEMA}.submissions.submission_id"), primary_key=True
    )
    dlq_topic: Mapped[str] = mapped_column(Text)
    dlq_partition: Mapped[int] = mapped_column(Integer)
    dlq_offset: Mapped[int] = mapped_column(BigInteger)
    recorded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class IdempotencyConflict(Base):
    """A known idempotency key offered again with different content (recorded, never swallowed)."""

    __tablename__ = "idempotency_conflicts"
    __table_args__ = (
        CheckConstraint(
            "reason IN ('input_hashes_differ', 'header_differs', 'entries_differ')",
            name="reason",
        ),
        Index(None, "idempotency_key"),
    )

    conflict_id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(Text)
    submission_id: Mapped[str] = mapped_column(Text, ForeignKey(f"{STORE_SCHEMA}.submissions.submission_id"))
    reason: Mapped[str] = mapped_column(Text)
    offered_submission_id: Mapped[str] = mapped_column(Text)
    offered_header: Mapped[dict[str, Any]] = mapped_column(JSONB)
    offered_entries: Mapped[list[Any]] = mapped_column(JSONB)
    offered_engine_version: Mapped[str] = mapped_column(Text)
    # operational, not committed
    received_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    kafka_topic: Mapped[str | None] = mapped_column(Text)
    kafka_partition: Mapped[int | None] = mapped_column(Integer)
    kafka_offset: Mapped[int | None] = mapped_column(BigInteger)
    host: Mapped[str | None] = mapped_column(Text)
    detected_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


metadata = Base.metadata
