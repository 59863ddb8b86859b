"""The log check compares whole tiles of leaves at once; a rewritten entry inside a full tile is
still named leaf by leaf (the comparison falls back to single leaves when a tile differs)."""

from __future__ import annotations

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Engine

from ledger.connect import libpq_url
from ledger.store.ledger_store import LedgerStore
from ledger.translog.checkpoints import create_checkpoint
from ledger.translog.tiles import TILE_WIDTH
from ledger.translog.verify import verify_checkpoints
from ledger.verify.runner import run_verify
from tests.helpers.ledger_factories import audited
from tests.integration.test_translog_tamper import _rewrite_entry, _superuser

pytestmark = pytest.mark.integration

TAMPERED_SEQ = 100  # inside the first whole tile (leaves 1..256)


def _ledger_beyond_one_tile(store: LedgerStore, engine: Engine, key: Ed25519PrivateKey) -> str:
    index = 0
    while store.max_seq() <= TILE_WIDTH + 20:
        store.append(audited(f"tile{index}"))
        index += 1
    return create_checkpoint(engine, key).note


def test_a_rewritten_entry_inside_a_whole_tile_is_named(
    ledger_store: LedgerStore, engine: Engine, key: Ed25519PrivateKey, migrated_database_url: str
) -> None:
    exported = _ledger_beyond_one_tile(ledger_store, engine, key)
    notes = [("cp.note", exported)]
    assert verify_checkpoints(engine, public_key=key.public_key(), external_notes=notes) == []
    before = run_verify(engine, public_key=key.public_key(), external_notes=notes)
    assert before.translog_checked and not [p for p in before.problems if p.source == "translog"]
    submission = _rewrite_entry(migrated_database_url, TAMPERED_SEQ)

    problems = verify_checkpoints(engine, public_key=key.public_key(), external_notes=notes)
    assert [(p.code, p.global_seq) for p in problems if p.code == "leaf_mismatch"] == [
        ("leaf_mismatch", TAMPERED_SEQ)
    ]
    mismatches = [p for p in problems if p.code == "checkpoint_root_mismatch"]
    assert mismatches and all(
        (p.global_seq, p.submission_id) == (TAMPERED_SEQ, submission) for p in mismatches
    )

    report = run_verify(engine, public_key=key.public_key(), external_notes=notes)
    assert (
        not report.ok
    )  # the factory's submissions carry no real roots: only the log's findings are compared
    codes = {(p.code, p.global_seq) for p in report.problems}
    assert ("translog.leaf_mismatch", TAMPERED_SEQ) in codes
    # the ledger pass proved the forged hashes: the log check took its leaf without reading the
    # entry, and looked up the submission only to name it
    assert {
        (p.global_seq, p.submission_id)
        for p in report.problems
        if p.code in ("translog.leaf_mismatch", "translog.checkpoint_root_mismatch")
    } == {(TAMPERED_SEQ, submission)}


def test_a_rewritten_tree_leaf_inside_a_whole_tile_is_named(
    ledger_store: LedgerStore, engine: Engine, key: Ed25519PrivateKey, migrated_database_url: str
) -> None:
    exported = _ledger_beyond_one_tile(ledger_store, engine, key)
    offset = (TAMPERED_SEQ - 1) * 32
    _superuser(
        migrated_database_url,
        (
            "UPDATE ledger_store.merkle_tiles SET hashes = overlay(hashes PLACING %s FROM %s FOR 32) "
            "WHERE level = 0 AND idx = 0",
            (b"\x01" * 32, offset + 1),
        ),
    )
    problems = verify_checkpoints(engine, public_key=key.public_key(), external_notes=[("cp.note", exported)])
    assert [(p.code, p.global_seq) for p in problems if p.code == "leaf_mismatch"] == [
        ("leaf_mismatch", TAMPERED_SEQ)
    ]

    report = run_verify(engine, public_key=key.public_key(), external_notes=[("cp.note", exported)])
    found = [p for p in report.problems if p.code == "translog.leaf_mismatch"]  # every leaf proven
    assert [p.global_seq for p in found] == [TAMPERED_SEQ]
    assert found[0].submission_id is not None and found[0].submission_id in found[0].message
    assert found[0].submission_id == _submission_at(migrated_database_url, TAMPERED_SEQ)


def _submission_at(url: str, seq: int) -> str:
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute(
            "SELECT submission_id FROM ledger_store.entries WHERE global_seq = %s", (seq,)
        ).fetchone()
    assert row is not None
    return str(row[0])
