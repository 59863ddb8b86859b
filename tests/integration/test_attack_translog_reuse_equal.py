"""The log check inside ``ledger verify`` (leaves reused from the ledger pass, whole tiles compared
as bytes) names exactly what the standalone check (every entry read and hashed) names, for
tamperings on and around tile boundaries, with ``--jobs 1`` and ``--jobs 2``."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Engine

from ledger.store.ledger_store import LedgerStore
from ledger.translog.checkpoints import create_checkpoint
from ledger.translog.tiles import TILE_WIDTH
from ledger.translog.verify import verify_checkpoints
from ledger.verify.runner import run_verify
from tests.helpers.ledger_factories import audited
from tests.integration.test_translog_tamper import _rewrite_entry, _superuser

pytestmark = pytest.mark.integration

ENTRIES = 2 * TILE_WIDTH + 40  # two whole tiles and a partial (right-edge) one


def _swap(url: str, seq: int) -> None:
    """Entries ``seq`` and ``seq + 1`` trade places in the global sequence."""
    _superuser(
        url,
        ("UPDATE ledger_store.entries SET global_seq = 1000000 WHERE global_seq = %s", (seq,)),
        ("UPDATE ledger_store.entries SET global_seq = %s WHERE global_seq = %s", (seq, seq + 1)),
        ("UPDATE ledger_store.entries SET global_seq = %s WHERE global_seq = 1000000", (seq + 1,)),
    )


def _tamper(url: str, case: str) -> None:
    if case == "swap_across_tiles":
        _swap(url, TILE_WIDTH)
    elif case == "unproven_inside_a_run":
        statement = "UPDATE ledger_store.entries SET payload_canonical = payload_canonical || ' ' "
        _superuser(url, (statement + "WHERE global_seq = %s", (TILE_WIDTH + 44,)))
        _rewrite_entry(url, 100)
    elif case == "partial_tile":
        _rewrite_entry(url, 2 * TILE_WIDTH + 18)
    else:  # a stored tree leaf rewritten inside the second whole tile
        _superuser(
            url,
            (
                "UPDATE ledger_store.merkle_tiles SET hashes = overlay(hashes PLACING '\\x00'::bytea "
                "FROM 33 FOR 1) WHERE level = 0 AND idx = 1",
                (),
            ),
        )


@pytest.mark.parametrize("case", ["swap_across_tiles", "unproven_inside_a_run", "partial_tile", "tree_leaf"])
def test_reused_leaves_name_what_the_standalone_check_names(
    ledger_store: LedgerStore,
    engine: Engine,
    key: Ed25519PrivateKey,
    migrated_database_url: str,
    case: str,
) -> None:
    index = 0
    while ledger_store.max_seq() <= ENTRIES:
        ledger_store.append(audited(f"equal{index}"))
        index += 1
    notes = [("cp.note", create_checkpoint(engine, key).note)]
    _tamper(migrated_database_url, case)

    standalone = verify_checkpoints(engine, public_key=key.public_key(), external_notes=notes)
    expected = sorted({(f"translog.{p.code}", p.global_seq, p.submission_id) for p in standalone})
    assert any(code == "translog.leaf_mismatch" for code, _, _ in expected), expected
    for jobs in (1, 2):
        report = run_verify(engine, public_key=key.public_key(), external_notes=notes, jobs=jobs)
        found = {(p.code, p.global_seq, p.submission_id) for p in report.problems if p.source == "translog"}
        assert sorted(found) == expected, jobs
