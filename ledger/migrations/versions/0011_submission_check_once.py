"""Cheaper appends: ``entries_submission_exists`` looks each submission up once per statement.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25

The statement-level trigger of revision 0009 anti-joined every inserted entry with
``submissions``. The planner ran that as one index probe per entry row (a batch of 100
submissions of 8 entries: 800 probes) or, on a small table, as a hash join over the whole
``submissions`` table. Now the distinct ``submission_id`` values of the statement's entries are
probed, each once (100 probes for that batch), and ``OFFSET 0`` keeps the ``NOT EXISTS`` a
correlated subplan (one index probe per value) whatever the table's size or statistics.

Measured with callgrind on a single-user PostgreSQL 18 (COPY of the append's own entries rows,
800 per statement, 8,000 in all): 73,700 → 67,500 instructions per entry row; a no-op trigger with
the same transition table costs 64,100.

The same statements are refused, with the same SQLSTATE 23503 (``foreign_key_violation``) and
message: a statement is refused exactly when some entry it inserts names a ``submission_id`` that
``submissions`` does not hold (``DISTINCT`` groups by the same equality the probe uses, and
``submission_id`` is NOT NULL). Only the plan changes. ``CREATE OR REPLACE`` keeps the function's
owner (``ledger_owner``) and its privileges (nobody else may execute it). Downgrade restores the
body of revision 0009.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "ledger_store"


def _function(candidates: str, probe_suffix: str) -> str:
    return f"""
CREATE OR REPLACE FUNCTION {S}.entries_submission_exists() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    missing text;
BEGIN
    SELECT n.submission_id INTO missing FROM {candidates} n
     WHERE NOT EXISTS (SELECT FROM {S}.submissions s WHERE s.submission_id = n.submission_id{probe_suffix})
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


# Each distinct submission_id once; OFFSET 0 keeps the probe a correlated subplan (an index probe).
SUBMISSION_EXISTS_ONCE = _function("(SELECT DISTINCT submission_id FROM new_entries)", " OFFSET 0")
SUBMISSION_EXISTS_0009 = _function("new_entries", "")


def upgrade() -> None:
    """Probe ``submissions`` once per distinct ``submission_id`` of the statement's entries."""
    op.execute(SUBMISSION_EXISTS_ONCE)


def downgrade() -> None:
    """The anti-join of revision 0009 (one probe per entry row)."""
    op.execute(SUBMISSION_EXISTS_0009)
