"""Tables and indexes of the least-privilege revision (``0005``), beside the store's models.

* ``append_lock``: an always-empty table whose ``EXCLUSIVE`` lock serialises appends. Taking that
  lock needs table-level UPDATE, which only ``ledger_writer`` (and the owner) hold; a
  ``ledger_reader`` login can neither lock it nor wait on it, so it cannot stall appends the way it
  could hold a well-known advisory lock key.
* ``consumer_offset_moves``: every change of ``consumer_offsets.next_offset``, written by a
  ``SECURITY DEFINER`` trigger the writer cannot bypass or write to directly. ``ledger verify``
  reads it to find forward moves that no stored record backs (a silent skip).
* ``ix_submissions_source`` / ``ix_idempotency_conflicts_source``: the Kafka coordinates of what
  was stored, so each recorded move is checked with index probes.

Registered on :data:`ledger.store.models.metadata` so the autogenerate comparison sees them.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Identity,
    Index,
    Integer,
    Table,
    Text,
    func,
)

from ledger.store.models import STORE_SCHEMA, IdempotencyConflict, Submission, metadata

__all__ = ["APPEND_LOCK_TABLE", "OFFSET_MOVES_TABLE", "append_lock", "consumer_offset_moves"]

APPEND_LOCK_TABLE = f"{STORE_SCHEMA}.append_lock"
OFFSET_MOVES_TABLE = f"{STORE_SCHEMA}.consumer_offset_moves"

append_lock = Table(
    "append_lock",
    metadata,
    Column("holder", Text, nullable=True),  # never written: the table exists to be locked
    schema=STORE_SCHEMA,
)

consumer_offset_moves = Table(
    "consumer_offset_moves",
    metadata,
    Column("move_id", BigInteger, Identity(always=True), primary_key=True),
    Column("consumer_group", Text, nullable=False),
    Column("topic", Text, nullable=False),
    Column("kafka_partition", Integer, nullable=False),
    Column("from_offset", BigInteger, nullable=True),
    Column("to_offset", BigInteger, nullable=False),
    Column("moved_by", Text, nullable=False),
    Column("moved_at", DateTime(timezone=True), server_default=func.now(), nullable=False),
    Index(
        "ix_consumer_offset_moves_group_topic_partition",
        "consumer_group",
        "topic",
        "kafka_partition",
        "move_id",
    ),
    schema=STORE_SCHEMA,
)

_submissions = Submission.__table__
_conflicts = IdempotencyConflict.__table__
Index(
    "ix_submissions_source",
    _submissions.c.kafka_topic,
    _submissions.c.kafka_partition,
    _submissions.c.kafka_offset,
)
Index(
    "ix_idempotency_conflicts_source",
    _conflicts.c.kafka_topic,
    _conflicts.c.kafka_partition,
    _conflicts.c.kafka_offset,
)
