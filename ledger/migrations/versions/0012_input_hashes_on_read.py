"""Cheaper appends: ``submissions.input_hashes`` is parsed on read, no longer a stored column.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25

``ledger_store.submissions.input_hashes`` was a stored JSONB generated from
``input_hashes_canonical``: every appended submission parsed its text into JSONB and wrote both.
Measured with callgrind on the backend of a PostgreSQL 18 (whole appends of ``bench_append.py``
submissions), the generated column cost about 10,400 instructions and 240 bytes of WAL
per submission. Nothing on the append, verify or replay path reads it: ``ledger verify`` hashes
the text. The view ``ledger.submissions`` keeps its ``input_hashes`` column (JSONB, the same
position and values), now ``input_hashes_canonical::jsonb``, parsed when a query reads it, as the
entries' ``payload`` is since revision 0009. ``CREATE OR REPLACE VIEW`` keeps the view's owner and
grants. Queries on the raw table use ``input_hashes_canonical::jsonb``.

Downgrade adds the generated column back (a rewrite of ``submissions``, filling it from the text as
before) and restores the view of revision 0008.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "ledger_store"
V = "ledger"


def _submissions_view(input_hashes: str) -> str:
    """Revision 0008's ``ledger.submissions`` with ``input_hashes`` as the given expression."""
    return f"""
CREATE OR REPLACE VIEW {V}.submissions AS
SELECT s.submission_id, s.idempotency_key, s.market_id, s.bundle_id, s.status, {input_hashes},
       s.engine_version, agg.first_seq, agg.last_seq, agg.entry_count, steps.step_count,
       s.received_at, s.kafka_topic, s.kafka_partition, s.kafka_offset, s.host, s.appended_at
  FROM {S}.submissions s
  CROSS JOIN LATERAL (
        SELECT min(e.global_seq) AS first_seq, max(e.global_seq) AS last_seq, count(*) AS entry_count
          FROM {S}.entries e WHERE e.submission_id = s.submission_id) agg
  CROSS JOIN LATERAL (
        SELECT count(*) AS step_count FROM {S}.trace_steps t WHERE t.submission_id = s.submission_id) steps"""


def upgrade() -> None:
    """The view parses ``input_hashes_canonical``; the stored generated column is dropped."""
    op.execute(_submissions_view("s.input_hashes_canonical::jsonb AS input_hashes"))
    op.execute(f"ALTER TABLE {S}.submissions DROP COLUMN input_hashes")


def downgrade() -> None:
    """The stored generated column again, and the view of revision 0008 reading it."""
    op.execute(
        f"ALTER TABLE {S}.submissions ADD COLUMN input_hashes jsonb "
        "GENERATED ALWAYS AS ((input_hashes_canonical)::jsonb) STORED"
    )
    op.execute(_submissions_view("s.input_hashes"))
