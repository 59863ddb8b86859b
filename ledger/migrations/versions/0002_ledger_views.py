"""SQL interface: the stable views of schema ``ledger`` (documented in docs/event-store.md §5).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21

Stability rule: a later migration may add columns at the end of a view (CREATE OR REPLACE VIEW)
but never renames, retypes or removes one.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "ledger_store"
V = "ledger"

# Total JSON accessors: a value of the wrong JSON type reads as NULL instead of failing a query.
HELPERS = f"""
CREATE FUNCTION {S}.json_bool(value jsonb) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT CASE WHEN jsonb_typeof(value) = 'boolean' THEN value::boolean END $$;
CREATE FUNCTION {S}.json_numeric(value jsonb) RETURNS numeric
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT CASE WHEN jsonb_typeof(value) = 'number' THEN value::numeric END $$;
CREATE FUNCTION {S}.json_bigint(value jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT CASE WHEN jsonb_typeof(value) = 'number' AND value::numeric = trunc(value::numeric)
                           AND abs(value::numeric) < 9223372036854775807
                      THEN value::numeric::bigint END $$;
"""

VIEWS = {
    "entries": f"""
SELECT e.global_seq, e.submission_id, e.stream_seq, e.kind, e.payload, e.payload_canonical,
       e.payload_hash, e.prev_hash, e.entry_hash, e.engine_version, e.appended_at
  FROM {S}.entries e""",
    "submissions": f"""
SELECT s.submission_id, s.idempotency_key, s.market_id, s.bundle_id, s.status, s.input_hashes,
       s.engine_version, agg.first_seq, agg.last_seq, agg.entry_count, steps.step_count,
       s.received_at, s.kafka_topic, s.kafka_partition, s.kafka_offset, s.host, s.appended_at
  FROM {S}.submissions s
  CROSS JOIN LATERAL (
        SELECT min(e.global_seq) AS first_seq, max(e.global_seq) AS last_seq, count(*) AS entry_count
          FROM {S}.entries e WHERE e.submission_id = s.submission_id) agg
  CROSS JOIN LATERAL (
        SELECT count(*) AS step_count FROM {S}.trace_steps t WHERE t.submission_id = s.submission_id) steps""",
    "trace_steps": f"""
SELECT t.submission_id, s.market_id, s.bundle_id, t.step_index, t.step_id, t.step_type, t.evidence_ids,
       t.step_hash, t.canonical_step::jsonb AS step, t.canonical_step, t.global_seq, e.entry_hash,
       e.engine_version, e.appended_at
  FROM {S}.trace_steps t
  JOIN {S}.submissions s ON s.submission_id = t.submission_id
  JOIN {S}.entries e ON e.global_seq = t.global_seq""",
    "audit_results": f"""
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
 WHERE e.kind = 'audit.completed'""",
    "verdicts": f"""
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
 WHERE e.kind = 'verdict.issued'""",
    "rejections": f"""
SELECT e.global_seq, e.submission_id, s.idempotency_key, s.market_id, s.bundle_id,
       e.payload ->> 'reason_code' AS reason_code,
       e.payload ->> 'message' AS message,
       e.payload ->> 'field_path' AS field_path,
       {S}.json_bigint(e.payload -> 'raw_size') AS raw_size,
       e.payload ->> 'raw_sha256' AS raw_sha256,
       e.payload ->> 'raw_base64' AS raw_base64,
       e.payload -> 'dlq' ->> 'topic' AS dlq_topic,
       {S}.json_bigint(e.payload -> 'dlq' -> 'partition')::integer AS dlq_partition,
       {S}.json_bigint(e.payload -> 'dlq' -> 'offset') AS dlq_offset,
       s.kafka_topic, s.kafka_partition, s.kafka_offset, s.host,
       e.payload, e.payload_hash, e.entry_hash, e.engine_version, s.received_at, e.appended_at
  FROM {S}.entries e
  JOIN {S}.submissions s ON s.submission_id = e.submission_id
 WHERE e.kind = 'submission.rejected'""",
    "idempotency_conflicts": f"""
SELECT c.conflict_id, c.idempotency_key, c.submission_id, c.reason, c.offered_submission_id,
       c.offered_header, c.offered_entries, c.offered_engine_version,
       c.received_at, c.kafka_topic, c.kafka_partition, c.kafka_offset, c.host, c.detected_at
  FROM {S}.idempotency_conflicts c""",
    "consumer_offsets": f"""
SELECT o.consumer_group, o.topic, o.kafka_partition, o.next_offset, o.updated_at
  FROM {S}.consumer_offsets o""",
}


def upgrade() -> None:
    """Create schema ``ledger`` with its views, owned by ``ledger_owner``, readable by reader and writer."""
    op.execute(HELPERS)
    op.execute(f"CREATE SCHEMA {V}")
    for name, query in VIEWS.items():
        op.execute(f"CREATE VIEW {V}.{name} AS {query}")
        op.execute(f"ALTER VIEW {V}.{name} OWNER TO ledger_owner")
    for function in ("json_bool", "json_numeric", "json_bigint"):
        op.execute(f"ALTER FUNCTION {S}.{function}(jsonb) OWNER TO ledger_owner")
    op.execute(f"ALTER SCHEMA {V} OWNER TO ledger_owner")
    op.execute(f"REVOKE ALL ON SCHEMA {V} FROM PUBLIC")
    op.execute(f"GRANT USAGE ON SCHEMA {V} TO ledger_reader, ledger_writer")
    op.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {V} TO ledger_reader, ledger_writer")


def downgrade() -> None:
    """Drop the views and helpers; the raw tables of 0001 stay."""
    op.execute(f"DROP SCHEMA {V} CASCADE")
    for function in ("json_bool", "json_numeric", "json_bigint"):
        op.execute(f"DROP FUNCTION {S}.{function}(jsonb)")
