"""Without lz4, entry rows up to 8 KB are stored inline and uncompressed: no pglz on the append path.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25

PostgreSQL compresses a row's long values once the row passes its TOAST threshold (about 2 KB): a
``submission.received`` payload (the prompt spec and evidence bundle, a few KB) and most
``audit.completed`` and ``verdict.issued`` payloads cross it. Revision 0009 made that lz4 where
the server has it; a server without lz4 (the embedded PostgreSQL 18 is built without it) still
compresses them with pglz, which costs more server CPU than the rest of the row's insert. On such a
server, ``toast_tuple_target = 8160`` (the largest value PostgreSQL accepts) on
``ledger_store.entries`` tells the toaster to leave a row alone while it fits in 8,160 bytes, so
such payloads are stored as they are, in the row. Rows larger than that are compressed and moved
out of line exactly as before. A server with lz4 is left as it is: there inline rows save about a
quarter of lz4's small cost and take 1.8 times the bytes and more WAL.

Measured (COPY of the payload texts of 1,000 accepted corpus submissions, 10,267 rows, 3,000 of
them over 2 KB, PostgreSQL 15, three runs each): server CPU 180–190 ms with pglz, 80 ms with lz4,
60–70 ms inline; table size 9.2 MB with pglz, 10.5 MB with lz4, 18.8 MB inline. So without lz4 the
trade is about 120 µs of server CPU per submission against about 1.8 times the table's bytes (and
reads no longer decompress). An operator who prefers the bytes can ``ALTER TABLE
ledger_store.entries RESET (toast_tuple_target)``: nothing stored, hashed or read back changes,
only how new rows are laid out on disk.

Nothing committed changes: ``payload_canonical`` is the same text; existing rows keep their
compressed values (only new rows are affected) and both kinds read back the same. Downgrade
resets the option (a no-op where it was not set).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "ledger_store"
TOAST_TUPLE_TARGET = 8160  # PostgreSQL's maximum for the option (8 KB pages)


# lz4 is among the setting's values only in a server built with it.
INLINE_WITHOUT_LZ4 = f"""
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_settings
                    WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        ALTER TABLE {S}.entries SET (toast_tuple_target = {TOAST_TUPLE_TARGET});
    END IF;
END $$"""


def upgrade() -> None:
    """Without lz4 in the server, keep entry rows up to :data:`TOAST_TUPLE_TARGET` bytes inline."""
    op.execute(INLINE_WITHOUT_LZ4)


def downgrade() -> None:
    """Back to PostgreSQL's default threshold (about 2 KB): long payloads are compressed again."""
    op.execute(f"ALTER TABLE {S}.entries RESET (toast_tuple_target)")
