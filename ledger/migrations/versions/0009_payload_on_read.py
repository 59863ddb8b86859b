"""Cheaper appends: ``payload`` is parsed on read, and one statement-level check replaces the FK.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24

Measured on PostgreSQL 15, server CPU per appended submission: ``bench/bench_append.py``'s small
synthetic ones (8 entries, 477 B average payload) 154 → 93 µs; the accepted corpus bundles (9.6
entries, ≈ 12 KB of payload) 636 → 220 µs, WAL 31.6 → 22.0 KB. Nothing hashed or committed changes; ``payload_canonical``
stays the stored, hashed text.

* ``ledger_store.entries.payload`` (``jsonb GENERATED ALWAYS AS (payload_canonical::jsonb) STORED``)
  is dropped: every append parsed each payload into a second binary copy, which doubled the bytes
  of a row (and pushed large rows into TOAST compression) and the WAL. The user-facing views keep
  their ``payload jsonb`` column at the same position, computed on read from ``payload_canonical``
  once per row (``CROSS JOIN LATERAL (SELECT e.payload_canonical::jsonb AS payload OFFSET 0) p``:
  the ``OFFSET 0`` keeps the planner from copying the cast into each of a view's references; a
  query that does not use ``payload`` does not parse it). The raw table has no ``payload`` column
  any more: query ``ledger.entries`` or cast ``payload_canonical::jsonb``.
  PostgreSQL 15 has no virtual generated columns, hence the views.
* ``fk_entries_submission_id_submissions`` is replaced by the statement-level trigger
  ``entries_submission_exists`` (``AFTER INSERT ... REFERENCING NEW TABLE``): one anti-join per
  INSERT/COPY statement instead of a row lookup and a row lock on the submission per entry. It
  refuses the statement (SQLSTATE 23503, ``foreign_key_violation``) when an inserted entry names no
  stored submission. What the FK's delete side guarded is already refused: ``submissions`` is
  append-only (no UPDATE, DELETE or TRUNCATE), and ``entries.submission_id`` cannot be updated.
  The function runs with the caller's rights (the writer may read ``submissions``); it is owned by
  ``ledger_owner`` and nobody else may execute it.

* ``payload_canonical`` is compressed with lz4 instead of pglz when the server has lz4 (a
  ``submission.received`` payload of a few KB crosses the TOAST threshold): on the corpus bundles
  about 310 → 220 µs of server CPU per submission. A server built without lz4 (the embedded
  PostgreSQL) keeps pglz; either way the same text is stored and read back, only new values use
  lz4, and both kinds are readable.

Downgrade adds the stored column back (at the end of the table: a table rewrite computes it for
every row), restores the FK (validated against every row) and the views of revision 0008.
"""

import re
from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "ledger_store"
V = "ledger"
FK = "fk_entries_submission_id_submissions"

SUBMISSION_EXISTS = f"""
CREATE FUNCTION {S}.entries_submission_exists() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    missing text;
BEGIN
    SELECT n.submission_id INTO missing FROM new_entries n
     WHERE NOT EXISTS (SELECT FROM {S}.submissions s WHERE s.submission_id = n.submission_id)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'insert into %.% refused: submission_id % is not in {S}.submissions',
            TG_TABLE_SCHEMA, TG_TABLE_NAME, missing
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END
$$;
"""

# ALTER ... SET COMPRESSION lz4 fails with feature_not_supported on a server built without lz4.
LZ4 = f"""
DO $$
BEGIN
    ALTER TABLE {S}.entries ALTER COLUMN payload_canonical SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    -- No lz4 in this server: pglz stays, which stores and returns the same text, only slower.
    RAISE NOTICE 'no lz4 in this server: %.entries.payload_canonical keeps pglz', '{S}';
END
$$;
"""

# The definitions of revision 0008 (from 0002, 0004 and 0006), unchanged: the downgrade restores
# them as they are, the upgrade derives the new ones from them with _payload_on_read.
ENTRIES_VIEW = f"""
SELECT e.global_seq, e.submission_id, e.stream_seq, e.kind, e.payload, e.payload_canonical,
       e.payload_hash, e.prev_hash, e.entry_hash, e.engine_version, e.appended_at
  FROM {S}.entries e"""
AUDIT_RESULTS_VIEW = f"""
SELECT e.global_seq, e.submission_id, s.market_id, s.bundle_id,
       {S}.json_bool(e.payload -> 'verification_result' -> 'ok') AS ok,
       e.payload -> 'verification_result' -> 'checks' AS checks,
       e.payload -> 'verification_result' -> 'challenge' AS challenge,
       e.payload -> 'verification_result' -> 'error' AS error,
       e.payload -> 'evaluation_variables' AS evaluation_variables,
       {S}.json_bool(e.payload -> 'evaluation_variables' -> 'event_observed') AS event_observed,
       {S}.json_bool(e.payload -> 'evaluation_variables' -> 'conflict_detected') AS conflict_detected,
       {S}.json_bool(e.payload -> 'evaluation_variables' -> 'insufficient_evidence') AS insufficient_evidence,
       e.payload -> 'roots' AS roots,
       e.payload -> 'roots' ->> 'prompt_spec_hash' AS prompt_spec_hash,
       e.payload -> 'roots' ->> 'evidence_root' AS evidence_root,
       {S}.json_bigint(e.payload -> 'roots' -> 'evidence_leaf_count') AS evidence_leaf_count,
       e.payload -> 'roots' ->> 'reasoning_root' AS reasoning_root,
       {S}.json_bigint(e.payload -> 'roots' -> 'reasoning_leaf_count') AS reasoning_leaf_count,
       e.payload, e.payload_hash, e.entry_hash, e.engine_version, s.received_at, e.appended_at
  FROM {S}.entries e
  JOIN {S}.submissions s ON s.submission_id = e.submission_id
 WHERE e.kind = 'audit.completed'"""
VERDICTS_VIEW = f"""
SELECT e.global_seq, e.submission_id, s.market_id, s.bundle_id,
       e.payload -> 'verdict' ->> 'outcome' AS outcome,
       {S}.json_numeric(e.payload -> 'verdict' -> 'confidence') AS confidence,
       e.payload -> 'verdict' ->> 'resolution_rule_id' AS resolution_rule_id,
       e.payload -> 'verdict' ->> 'resolution_time' AS resolution_time,
       e.payload -> 'roots' ->> 'verdict_hash' AS verdict_hash,
       e.payload -> 'roots' ->> 'por_root' AS por_root,
       e.payload -> 'roots' ->> 'prompt_spec_hash' AS prompt_spec_hash,
       e.payload -> 'roots' ->> 'evidence_root' AS evidence_root,
       e.payload -> 'roots' ->> 'reasoning_root' AS reasoning_root,
       e.payload -> 'verdict' AS verdict, e.payload -> 'roots' AS roots,
       e.payload_hash, e.entry_hash, e.engine_version, s.received_at, e.appended_at
  FROM {S}.entries e
  JOIN {S}.submissions s ON s.submission_id = e.submission_id
 WHERE e.kind = 'verdict.issued'"""
REJECTIONS_VIEW = f"""
SELECT e.global_seq, e.submission_id, s.idempotency_key, s.market_id, s.bundle_id,
       e.payload ->> 'reason_code' AS reason_code,
       e.payload ->> 'message' AS message,
       e.payload ->> 'field_path' AS field_path,
       {S}.json_bigint(e.payload -> 'raw_size') AS raw_size,
       e.payload ->> 'raw_sha256' AS raw_sha256,
       e.payload ->> 'raw_base64' AS raw_base64,
       coalesce(e.payload -> 'dlq' ->> 'topic', d.dlq_topic) AS dlq_topic,
       coalesce({S}.json_bigint(e.payload -> 'dlq' -> 'partition')::integer, d.dlq_partition) AS dlq_partition,
       coalesce({S}.json_bigint(e.payload -> 'dlq' -> 'offset'), d.dlq_offset) AS dlq_offset,
       s.kafka_topic, s.kafka_partition, s.kafka_offset, s.host,
       e.payload, e.payload_hash, e.entry_hash, e.engine_version, s.received_at, e.appended_at
  FROM {S}.entries e
  JOIN {S}.submissions s ON s.submission_id = e.submission_id
  LEFT JOIN {S}.dead_letters d ON d.submission_id = e.submission_id
 WHERE e.kind = 'submission.rejected'"""
POR_VERIFICATIONS_VIEW = f"""
SELECT s.submission_id, s.idempotency_key, s.market_id, s.bundle_id,
       e.payload -> 'report' ->> 'status' AS status,
       e.payload -> 'report' ->> 'por_root' AS por_root,
       e.payload ->> 'pack_hash' AS pack_hash,
       e.payload -> 'stored_pack' ->> 'form' AS pack_form,
       e.payload ->> 'event_id' AS event_id,
       (SELECT coalesce(jsonb_agg(c ->> 'check_id' ORDER BY ord), '[]'::jsonb)
          FROM jsonb_array_elements(e.payload -> 'report' -> 'checks') WITH ORDINALITY AS x(c, ord)
         WHERE c ->> 'status' IN ('failed', 'unverifiable')) AS failed_checks,
       jsonb_array_length(e.payload -> 'report' -> 'checks') AS check_count,
       jsonb_array_length(e.payload -> 'report' -> 'challenges') AS challenge_count,
       e.payload -> 'report' -> 'checks' AS checks,
       e.payload -> 'report' -> 'challenges' AS challenges,
       e.payload ->> 'report_hash' AS report_hash,
       e.global_seq, e.entry_hash, e.engine_version, e.appended_at,
       s.received_at, s.kafka_topic, s.kafka_partition, s.kafka_offset
  FROM {S}.entries e
  JOIN {S}.submissions s ON s.submission_id = e.submission_id
 WHERE e.kind = 'por.verified'"""
VIEWS_0008 = {
    "entries": ENTRIES_VIEW,
    "audit_results": AUDIT_RESULTS_VIEW,
    "verdicts": VERDICTS_VIEW,
    "rejections": REJECTIONS_VIEW,
    "por_verifications": POR_VERIFICATIONS_VIEW,
}
ON_READ = f"{S}.entries e\n  CROSS JOIN LATERAL (SELECT e.payload_canonical::jsonb AS payload OFFSET 0) p"


def _payload_on_read(query: str) -> str:
    """The view with ``payload`` parsed once per row from ``payload_canonical`` (``p.payload``)."""
    if query.count(f"{S}.entries e\n") + query.endswith(f"{S}.entries e") != 1:
        raise ValueError(f"expected one {S}.entries e in {query}")
    query = query.replace(f"{S}.entries e", ON_READ, 1)
    return re.sub(r"\be\.payload\b", "p.payload", query)


def _create_views(views: dict[str, str]) -> None:
    for name, query in views.items():
        op.execute(f"CREATE VIEW {V}.{name} AS {query}")
        op.execute(f"ALTER VIEW {V}.{name} OWNER TO ledger_owner")
        op.execute(f"GRANT SELECT ON {V}.{name} TO ledger_reader, ledger_writer")


def _drop_views() -> None:
    for name in VIEWS_0008:
        op.execute(f"DROP VIEW {V}.{name}")


def upgrade() -> None:
    """Drop the stored ``payload`` (views parse it on read); the FK becomes a statement-level check."""
    _drop_views()
    op.execute(f"ALTER TABLE {S}.entries DROP COLUMN payload")
    _create_views({name: _payload_on_read(query) for name, query in VIEWS_0008.items()})
    op.execute(SUBMISSION_EXISTS)
    op.execute(f"ALTER FUNCTION {S}.entries_submission_exists() OWNER TO ledger_owner")
    op.execute(f"REVOKE ALL ON FUNCTION {S}.entries_submission_exists() FROM PUBLIC")
    op.execute(
        f"CREATE TRIGGER entries_submission_exists AFTER INSERT ON {S}.entries "
        f"REFERENCING NEW TABLE AS new_entries FOR EACH STATEMENT EXECUTE FUNCTION {S}.entries_submission_exists()"
    )
    op.execute(f"ALTER TABLE {S}.entries DROP CONSTRAINT {FK}")
    op.execute(LZ4)


def downgrade() -> None:
    """Restore the FK, the stored ``payload`` column (computed for every row) and the views of 0008."""
    op.execute(f"ALTER TABLE {S}.entries ALTER COLUMN payload_canonical SET COMPRESSION default")
    op.execute(
        f"ALTER TABLE {S}.entries ADD CONSTRAINT {FK} FOREIGN KEY (submission_id) "
        f"REFERENCES {S}.submissions (submission_id)"
    )
    op.execute(f"DROP TRIGGER entries_submission_exists ON {S}.entries")
    op.execute(f"DROP FUNCTION {S}.entries_submission_exists()")
    _drop_views()
    op.execute(
        f"ALTER TABLE {S}.entries ADD COLUMN payload jsonb "
        "GENERATED ALWAYS AS ((payload_canonical)::jsonb) STORED NOT NULL"
    )
    _create_views(VIEWS_0008)
