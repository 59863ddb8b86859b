"""One row per step: the ``trace_steps`` columns move into the step's ``trace.step`` entry row.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24

Each step was stored twice: a ``trace.step`` entry (position and hash, committed by the chain) and
a ``trace_steps`` row (the step body). Now the entry row carries the body in nullable columns
``step_index, step_id, step_type, evidence_ids, step_hash, canonical_step``, set exactly on
``kind = 'trace.step'`` rows (``ck_entries_step_columns``). Nothing hashed changes: payloads,
payload hashes, chains and Merkle leaves are the same bytes. ``ledger_store.trace_steps`` becomes a
view over those rows with the table's columns. The views of schema ``ledger`` keep their definitions.

* No index replaces the old primary key ``(submission_id, step_index)``: measured, a partial unique
  index cost about 6% of the server's append CPU. A draft with a repeated ``step_index`` is refused
  before any write (``SubmissionDraft``), and ``ledger verify`` requires each submission's step
  indexes to be exactly ``0..n-1``. Readers find a submission's steps through
  ``(submission_id, stream_seq)``.

* Upgrade refuses a ledger whose step rows do not pair one-to-one with ``trace.step`` entries of
  the same submission (``ledger verify`` names them), so nothing is dropped or invented. Filling
  the new columns is the one UPDATE the ledger ever sees: ``entries_append_only`` is disabled for
  it and enabled again in the same transaction (a failure rolls both back).
* Grants: the view is owned by ``ledger_owner``; ``ledger_writer`` and ``ledger_reader`` get SELECT
  only (the writer's INSERT on the old table is not carried over: appends write ``entries``).
* Downgrade recreates the table as revision 0001 did (constraints, triggers, owner, grants), copies
  the step columns back and drops them.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "ledger_store"
V = "ledger"
STEP_COLUMNS = ("step_index", "step_id", "step_type", "evidence_ids", "step_hash", "canonical_step")
ALL_STEP = ", ".join(STEP_COLUMNS)
TABLE_COLUMNS = "submission_id, step_index, global_seq, step_id, step_type, evidence_ids, step_hash, canonical_step"

REFUSED = "run `ledger verify` with the previous release; migration refused"

# PL/pgSQL so that offline mode (`alembic upgrade head --sql`) emits the check too.
CHECK_PAIRING = f"""
DO $$
DECLARE
    unpaired_rows bigint;
    unpaired_entries bigint;
BEGIN
    SELECT count(*) INTO unpaired_rows FROM {S}.trace_steps t
      LEFT JOIN {S}.entries e ON e.global_seq = t.global_seq
     WHERE e.global_seq IS NULL OR e.submission_id <> t.submission_id OR e.kind <> 'trace.step';
    SELECT count(*) INTO unpaired_entries FROM {S}.entries e
     WHERE e.kind = 'trace.step' AND NOT EXISTS (SELECT FROM {S}.trace_steps t WHERE t.global_seq = e.global_seq);
    IF unpaired_rows <> 0 OR unpaired_entries <> 0 THEN
        RAISE EXCEPTION '% trace_steps rows without their trace.step entry, % trace.step entries without '
            'a step row; {REFUSED}', unpaired_rows, unpaired_entries;
    END IF;
END
$$;
"""

STEP_VIEW = f"""
SELECT e.submission_id, e.step_index, e.global_seq, e.step_id, e.step_type, e.evidence_ids, e.step_hash,
       e.canonical_step
  FROM {S}.entries e
 WHERE e.kind = 'trace.step'"""

# Revision 0002's definitions, unchanged: recreated because they depend on ledger_store.trace_steps.
SUBMISSIONS_VIEW = f"""
SELECT s.submission_id, s.idempotency_key, s.market_id, s.bundle_id, s.status, s.input_hashes,
       s.engine_version, agg.first_seq, agg.last_seq, agg.entry_count, steps.step_count,
       s.received_at, s.kafka_topic, s.kafka_partition, s.kafka_offset, s.host, s.appended_at
  FROM {S}.submissions s
  CROSS JOIN LATERAL (
        SELECT min(e.global_seq) AS first_seq, max(e.global_seq) AS last_seq, count(*) AS entry_count
          FROM {S}.entries e WHERE e.submission_id = s.submission_id) agg
  CROSS JOIN LATERAL (
        SELECT count(*) AS step_count FROM {S}.trace_steps t WHERE t.submission_id = s.submission_id) steps"""
TRACE_STEPS_VIEW = f"""
SELECT t.submission_id, s.market_id, s.bundle_id, t.step_index, t.step_id, t.step_type, t.evidence_ids,
       t.step_hash, t.canonical_step::jsonb AS step, t.canonical_step, t.global_seq, e.entry_hash,
       e.engine_version, e.appended_at
  FROM {S}.trace_steps t
  JOIN {S}.submissions s ON s.submission_id = t.submission_id
  JOIN {S}.entries e ON e.global_seq = t.global_seq"""


def _hex32(column: str) -> str:
    return f"octet_length({column}) = 66 AND {column} LIKE '0x%'"


def _drop_ledger_views() -> None:
    op.execute(f"DROP VIEW {V}.trace_steps")
    op.execute(f"DROP VIEW {V}.submissions")


def _create_ledger_views() -> None:
    for name, query in (("submissions", SUBMISSIONS_VIEW), ("trace_steps", TRACE_STEPS_VIEW)):
        op.execute(f"CREATE VIEW {V}.{name} AS {query}")
        op.execute(f"ALTER VIEW {V}.{name} OWNER TO ledger_owner")
        op.execute(f"GRANT SELECT ON {V}.{name} TO ledger_reader, ledger_writer")


def upgrade() -> None:
    """Add the step columns to ``entries``, move the step rows into them, replace the table by a view."""
    op.execute(CHECK_PAIRING)
    op.add_column("entries", sa.Column("step_index", sa.Integer(), nullable=True), schema=S)
    op.add_column("entries", sa.Column("step_id", sa.Text(), nullable=True), schema=S)
    op.add_column("entries", sa.Column("step_type", sa.Text(), nullable=True), schema=S)
    op.add_column("entries", sa.Column("evidence_ids", sa.ARRAY(sa.Text()), nullable=True), schema=S)
    op.add_column("entries", sa.Column("step_hash", sa.Text(), nullable=True), schema=S)
    op.add_column("entries", sa.Column("canonical_step", sa.Text(), nullable=True), schema=S)
    op.execute(f"ALTER TABLE {S}.entries DISABLE TRIGGER entries_append_only")
    op.execute(
        f"UPDATE {S}.entries e SET ({ALL_STEP}) = "
        f"(t.step_index, t.step_id, t.step_type, t.evidence_ids, t.step_hash, t.canonical_step) "
        f"FROM {S}.trace_steps t WHERE e.global_seq = t.global_seq"
    )
    op.execute(f"ALTER TABLE {S}.entries ENABLE TRIGGER entries_append_only")
    op.create_check_constraint(
        op.f("ck_entries_step_columns"),
        "entries",
        f"num_nulls({ALL_STEP}) = CASE WHEN kind = 'trace.step' THEN 0 ELSE {len(STEP_COLUMNS)} END",
        schema=S,
    )
    op.create_check_constraint(op.f("ck_entries_step_hash_hex"), "entries", _hex32("step_hash"), schema=S)
    op.create_check_constraint(op.f("ck_entries_step_index_nonnegative"), "entries", "step_index >= 0", schema=S)
    _drop_ledger_views()
    op.drop_table("trace_steps", schema=S)
    op.execute(f"CREATE VIEW {S}.trace_steps AS {STEP_VIEW}")
    op.execute(f"ALTER VIEW {S}.trace_steps OWNER TO ledger_owner")
    op.execute(f"REVOKE ALL ON {S}.trace_steps FROM PUBLIC, ledger_writer, ledger_reader")
    op.execute(f"GRANT SELECT ON {S}.trace_steps TO ledger_writer, ledger_reader")
    _create_ledger_views()


def downgrade() -> None:
    """Recreate the ``trace_steps`` table (as revision 0001 did), copy the steps back, drop the columns."""
    _drop_ledger_views()
    op.execute(f"DROP VIEW {S}.trace_steps")
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
        sa.CheckConstraint(_hex32("step_hash"), name=op.f("ck_trace_steps_step_hash_hex")),
        sa.CheckConstraint("step_index >= 0", name=op.f("ck_trace_steps_step_index_nonnegative")),
        sa.PrimaryKeyConstraint("submission_id", "step_index", name=op.f("pk_trace_steps")),
        sa.UniqueConstraint("global_seq", name=op.f("uq_trace_steps_global_seq")),
        schema=S,
    )
    op.execute(
        f"CREATE TRIGGER trace_steps_append_only BEFORE UPDATE OR DELETE ON {S}.trace_steps "
        f"FOR EACH ROW EXECUTE FUNCTION {S}.refuse_mutation()"
    )
    op.execute(
        f"CREATE TRIGGER trace_steps_no_truncate BEFORE TRUNCATE ON {S}.trace_steps "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {S}.refuse_mutation()"
    )
    op.execute(f"ALTER TABLE {S}.trace_steps OWNER TO ledger_owner")
    op.execute(f"REVOKE ALL ON {S}.trace_steps FROM PUBLIC, ledger_writer, ledger_reader")
    op.execute(f"GRANT SELECT, INSERT ON {S}.trace_steps TO ledger_writer")
    op.execute(f"GRANT SELECT ON {S}.trace_steps TO ledger_reader")
    op.execute(
        f"INSERT INTO {S}.trace_steps ({TABLE_COLUMNS}) SELECT {TABLE_COLUMNS} FROM {S}.entries "
        "WHERE kind = 'trace.step' ORDER BY global_seq"
    )
    for name in ("step_index_nonnegative", "step_hash_hex", "step_columns"):
        op.drop_constraint(op.f(f"ck_entries_{name}"), "entries", type_="check", schema=S)
    for column in reversed(STEP_COLUMNS):
        op.drop_column("entries", column, schema=S)
    _create_ledger_views()
