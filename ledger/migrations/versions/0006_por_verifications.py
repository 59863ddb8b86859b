"""Verified Cournot PoR packs: the ``por.verified`` entry kind, status ``por_verified``, and the view.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24

A PoR-pack record (``consumers/por_envelope.py``) becomes a submission of status ``por_verified``
with one ``por.verified`` entry (the pack as received and the verifier's full report).
``ledger.por_verifications`` shows one row per verified pack: the pack's verification status, its
claimed roots, the failed checks and the challenges.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "ledger_store"
V = "ledger"
OLD_KINDS = (
    "'submission.received', 'trace.step', 'audit.completed', 'reasoning.verified', "
    "'verdict.issued', 'submission.rejected', 'replay.verified'"
)
NEW_KINDS = OLD_KINDS + ", 'por.verified'"

VIEW = f"""
CREATE VIEW {V}.por_verifications AS
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
 WHERE e.kind = 'por.verified'
"""


def _constraints(kinds: str, statuses: str) -> None:
    op.execute(f"ALTER TABLE {S}.entries DROP CONSTRAINT ck_entries_kind")
    op.execute(f"ALTER TABLE {S}.entries ADD CONSTRAINT ck_entries_kind CHECK (kind IN ({kinds}))")
    op.execute(f"ALTER TABLE {S}.submissions DROP CONSTRAINT ck_submissions_status")
    op.execute(
        f"ALTER TABLE {S}.submissions ADD CONSTRAINT ck_submissions_status CHECK (status IN ({statuses}))"
    )


def upgrade() -> None:
    """Allow the new kind and status; create ``ledger.por_verifications`` for reader and writer."""
    _constraints(NEW_KINDS, "'audited', 'rejected', 'por_verified'")
    op.execute(VIEW)
    op.execute(f"ALTER VIEW {V}.por_verifications OWNER TO ledger_owner")
    op.execute(f"GRANT SELECT ON {V}.por_verifications TO ledger_reader, ledger_writer")


def downgrade() -> None:
    """Drop the view and restore the constraints (fails while por_verified rows exist: never lose them)."""
    op.execute(f"DROP VIEW {V}.por_verifications")
    _constraints(OLD_KINDS, "'audited', 'rejected'")
