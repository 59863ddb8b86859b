"""Transparency log stored as C2SP tlog-tiles: ``merkle_tiles`` replaces ``merkle_nodes``.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24

``merkle_tiles(level, idx, width, hashes)``: tile ``(L, N)`` holds ``width`` concatenated 32-byte
hashes of tree level ``8 * L``, nodes ``256 * N ..`` (docs/transparency-log.md). One row per tile
instead of one per perfect subtree: about 2 rows per leaf become a 256th of a row per leaf plus
the partial right edge. The other tree levels are computed from the tiles when a proof needs them.

* A full tile never changes and a partial tile only grows: ``merkle_tiles_extend_only`` refuses any
  other UPDATE, ``refuse_mutation`` every DELETE and TRUNCATE.
* Grants as for ``merkle_nodes`` (owner ``ledger_owner``; reader SELECT), plus UPDATE for the
  writer, which widens the partial tiles (``INSERT … ON CONFLICT DO UPDATE``). The reader still
  holds SELECT only: it can take no lock beyond ACCESS SHARE and no row lock, so it cannot stall
  an append.
* Upgrade copies the stored levels 0, 8, 16, … of ``merkle_nodes`` into tiles, refusing a tree that
  is not complete and contiguous, then drops ``merkle_nodes``. Downgrade rebuilds every node from
  the level-0 tiles (SHA-256 in SQL), checks the rebuilt levels 8, 16, … against the tiles, and
  drops ``merkle_tiles``.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "ledger_store"
TILES = f"{S}.merkle_tiles"
NODES = f"{S}.merkle_nodes"
MAX_NODE_LEVEL = 62

EXTEND_ONLY = f"""
CREATE FUNCTION {S}.merkle_tiles_extend_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.level = OLD.level AND NEW.idx = OLD.idx AND OLD.width < 256 AND NEW.width > OLD.width
       AND substring(NEW.hashes FROM 1 FOR octet_length(OLD.hashes)) = OLD.hashes THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION '%.% tile (%, %) may only grow: UPDATE refused', TG_TABLE_SCHEMA, TG_TABLE_NAME,
        OLD.level, OLD.idx
        USING HINT = 'a full tile never changes; a partial tile only gains hashes at its end';
END
$$;
"""


def _protect(table: str, *, update_trigger: str) -> None:
    op.execute(
        f"CREATE TRIGGER {table}_append_only BEFORE {update_trigger} ON {S}.{table} "
        f"FOR EACH ROW EXECUTE FUNCTION {S}.refuse_mutation()"
    )
    op.execute(
        f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {S}.{table} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {S}.refuse_mutation()"
    )
    op.execute(f"ALTER TABLE {S}.{table} OWNER TO ledger_owner")
    op.execute(f"REVOKE ALL ON {S}.{table} FROM PUBLIC, ledger_writer, ledger_reader")
    op.execute(f"GRANT SELECT ON {S}.{table} TO ledger_reader")


REFUSED = "run `ledger verify-log` with the previous release; migration refused"

# The checks are PL/pgSQL so that they also run in offline mode (`alembic upgrade head --sql`):
# the generated script refuses an incomplete tree itself instead of the generator skipping the check.
CHECK_NODES_COMPLETE = f"""
DO $$
DECLARE
    leaves bigint;
    lvl int;
    found bigint;
    last_idx bigint;
BEGIN
    SELECT count(*) INTO leaves FROM {NODES} WHERE level = 0;
    FOR lvl IN 0..{MAX_NODE_LEVEL} BY 8 LOOP
        SELECT count(*), coalesce(max(idx), -1) INTO found, last_idx FROM {NODES} WHERE level = lvl;
        IF found <> (leaves >> lvl) OR last_idx <> found - 1 THEN
            RAISE EXCEPTION 'merkle_nodes level % holds % nodes up to idx %, not %; {REFUSED}',
                lvl, found, last_idx, leaves >> lvl;
        END IF;
    END LOOP;
END
$$;
"""

REBUILD_NODES = f"""
DO $$
DECLARE
    lvl int;
    added bigint;
    differing bigint;
    stored bigint;
    rebuilt bigint;
BEGIN
    INSERT INTO {NODES} (level, idx, hash)
    SELECT 0, t.idx * 256 + g, substring(t.hashes FROM g * 32 + 1 FOR 32)
    FROM {TILES} t CROSS JOIN LATERAL generate_series(0, t.width - 1) AS g WHERE t.level = 0;
    FOR lvl IN 1..{MAX_NODE_LEVEL} LOOP
        INSERT INTO {NODES} (level, idx, hash)
        SELECT lvl, a.idx / 2, sha256(decode('01', 'hex') || a.hash || b.hash)
        FROM {NODES} a JOIN {NODES} b ON b.level = a.level AND b.idx = a.idx + 1
        WHERE a.level = lvl - 1 AND mod(a.idx, 2) = 0;
        GET DIAGNOSTICS added = ROW_COUNT;
        EXIT WHEN added = 0;
    END LOOP;
    SELECT count(*) INTO differing
    FROM {TILES} t CROSS JOIN LATERAL generate_series(0, t.width - 1) AS g
    LEFT JOIN {NODES} n ON n.level = t.level * 8 AND n.idx = t.idx * 256 + g
    WHERE n.hash IS DISTINCT FROM substring(t.hashes FROM g * 32 + 1 FOR 32);
    SELECT coalesce(sum(width), 0) INTO stored FROM {TILES};
    SELECT count(*) INTO rebuilt FROM {NODES} WHERE mod(level, 8) = 0;
    IF differing <> 0 OR stored <> rebuilt THEN
        RAISE EXCEPTION '% tile hashes differ from the nodes rebuilt from the leaves; {REFUSED}', differing;
    END IF;
END
$$;
"""


def upgrade() -> None:
    """Create ``merkle_tiles``, fill it from ``merkle_nodes``, drop ``merkle_nodes``."""
    op.create_table(
        "merkle_tiles",
        sa.Column("level", sa.SmallInteger(), nullable=False),
        sa.Column("idx", sa.BigInteger(), nullable=False),
        sa.Column("width", sa.SmallInteger(), nullable=False),
        sa.Column("hashes", sa.LargeBinary(), nullable=False),
        sa.CheckConstraint("level BETWEEN 0 AND 7", name=op.f("ck_merkle_tiles_level_range")),
        sa.CheckConstraint("idx >= 0", name=op.f("ck_merkle_tiles_idx_nonnegative")),
        sa.CheckConstraint("width BETWEEN 1 AND 256", name=op.f("ck_merkle_tiles_width_range")),
        sa.CheckConstraint("octet_length(hashes) = 32 * width", name=op.f("ck_merkle_tiles_hashes_length")),
        sa.PrimaryKeyConstraint("level", "idx", name=op.f("pk_merkle_tiles")),
        schema=S,
    )
    # Hashes do not compress: never try. A partial tile (< 8 KiB) stays inline, a full one goes to TOAST.
    op.execute(f"ALTER TABLE {TILES} ALTER COLUMN hashes SET STORAGE EXTERNAL")
    op.execute(f"ALTER TABLE {TILES} SET (toast_tuple_target = 8160)")
    op.execute(EXTEND_ONLY)
    op.execute(f"ALTER FUNCTION {S}.merkle_tiles_extend_only() OWNER TO ledger_owner")
    op.execute(
        f"CREATE TRIGGER merkle_tiles_extend_only BEFORE UPDATE ON {TILES} "
        f"FOR EACH ROW EXECUTE FUNCTION {S}.merkle_tiles_extend_only()"
    )
    _protect("merkle_tiles", update_trigger="DELETE")
    op.execute(f"GRANT SELECT, INSERT, UPDATE ON {TILES} TO ledger_writer")

    op.execute(CHECK_NODES_COMPLETE)
    op.execute(
        f"INSERT INTO {TILES} (level, idx, width, hashes) "
        "SELECT level / 8, idx >> 8, count(*), string_agg(hash, ''::bytea ORDER BY idx) "
        f"FROM {NODES} WHERE mod(level, 8) = 0 GROUP BY level / 8, idx >> 8"
    )
    op.drop_table("merkle_nodes", schema=S)


def downgrade() -> None:
    """Recreate ``merkle_nodes`` (as revision 0003 did), rebuild every node from the tiles, drop the tiles."""
    op.create_table(
        "merkle_nodes",
        sa.Column("level", sa.SmallInteger(), nullable=False),
        sa.Column("idx", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.LargeBinary(), nullable=False),
        sa.CheckConstraint("level BETWEEN 0 AND 62", name=op.f("ck_merkle_nodes_level_range")),
        sa.CheckConstraint("idx >= 0", name=op.f("ck_merkle_nodes_idx_nonnegative")),
        sa.CheckConstraint("octet_length(hash) = 32", name=op.f("ck_merkle_nodes_hash_length")),
        sa.PrimaryKeyConstraint("level", "idx", name=op.f("pk_merkle_nodes")),
        schema=S,
    )
    _protect("merkle_nodes", update_trigger="UPDATE OR DELETE")
    op.execute(f"GRANT SELECT, INSERT ON {NODES} TO ledger_writer")

    op.execute(REBUILD_NODES)
    op.drop_table("merkle_tiles", schema=S)
    op.execute(f"DROP FUNCTION {S}.merkle_tiles_extend_only()")
