"""A database superuser rewrites a committed entry behind the triggers' back
(``session_replication_role = replica``). The exported, signed checkpoint still catches it and
the check names the first bad leaf: its global_seq and its submission."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Engine

from cli.main import main
from ledger.connect import libpq_url
from ledger.settings import get_settings
from ledger.store.hashing import entry_hash, payload_hash
from ledger.store.ledger_store import LedgerStore
from ledger.translog.checkpoints import CheckpointDamagedError, create_checkpoint
from ledger.translog.tree import catch_up_tree
from ledger.translog.verify import verify_checkpoints
from tests.helpers.ledger_factories import audited

pytestmark = pytest.mark.integration

TAMPERED_SEQ = 9


def _superuser(url: str, *statements: tuple[str, tuple[object, ...]]) -> None:
    with psycopg.connect(libpq_url(url)) as conn, conn.transaction():
        if not conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]:
            pytest.skip("the test database user is not a superuser")
        conn.execute("SET LOCAL session_replication_role = replica")  # ordinary triggers stop firing
        for statement, params in statements:
            conn.execute(statement, params)


def _rewrite_entry(url: str, seq: int) -> str:
    """Change an entry's payload and recompute its payload_hash and entry_hash, as an attacker would."""
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute(
            "SELECT submission_id, stream_seq, kind, prev_hash, engine_version, payload_canonical "
            "FROM ledger_store.entries WHERE global_seq = %s",
            (seq,),
        ).fetchone()
    submission, stream_seq, kind, prev_hash, version, payload = row
    forged = payload[:-1] + ',"zz_forged":true}'
    forged_hash = entry_hash(submission, stream_seq, kind, payload_hash(forged), prev_hash, version)
    _superuser(
        url,
        (
            "UPDATE ledger_store.entries SET payload_canonical = %s, payload_hash = %s, entry_hash = %s "
            "WHERE global_seq = %s",
            (forged, payload_hash(forged), forged_hash, seq),
        ),
    )
    return str(submission)


def _ledger_with_exported_checkpoint(store: LedgerStore, engine: Engine, key: Ed25519PrivateKey) -> str:
    for name in ("t1", "t2", "t3"):
        store.append(audited(name))
    return create_checkpoint(engine, key).note  # the copy kept outside the database


def test_rewritten_entry_fails_against_the_exported_checkpoint_naming_the_first_bad_leaf(
    ledger_store: LedgerStore, engine: Engine, key: Ed25519PrivateKey, migrated_database_url: str
) -> None:
    exported = _ledger_with_exported_checkpoint(ledger_store, engine, key)
    assert (
        verify_checkpoints(engine, public_key=key.public_key(), external_notes=[("cp.note", exported)]) == []
    )
    submission = _rewrite_entry(migrated_database_url, TAMPERED_SEQ)

    problems = verify_checkpoints(engine, public_key=key.public_key(), external_notes=[("cp.note", exported)])
    mismatches = [p for p in problems if p.code == "checkpoint_root_mismatch"]
    assert {p.checkpoint for p in mismatches} == {"checkpoint 1", "exported checkpoint cp.note"}
    for problem in mismatches:
        assert (problem.global_seq, problem.submission_id) == (TAMPERED_SEQ, submission)
        assert f"first bad leaf: index {TAMPERED_SEQ - 1}, entry global_seq {TAMPERED_SEQ}" in problem.message
    (leaf,) = [p for p in problems if p.code == "leaf_mismatch"]
    assert leaf.global_seq == TAMPERED_SEQ


def test_a_new_checkpoint_still_commits_to_the_original_entry(
    ledger_store: LedgerStore, engine: Engine, key: Ed25519PrivateKey, migrated_database_url: str
) -> None:
    exported = _ledger_with_exported_checkpoint(ledger_store, engine, key)
    _rewrite_entry(migrated_database_url, TAMPERED_SEQ)
    again = create_checkpoint(engine, key)  # the tree was built from the original entry
    assert again.note.split("\n")[:3] == exported.split("\n")[:3]
    problems = verify_checkpoints(engine, public_key=key.public_key())
    assert {p.checkpoint for p in problems if p.code == "checkpoint_root_mismatch"} == {
        "checkpoint 1",
        "checkpoint 2",
    }


def test_signing_refuses_an_entry_rewritten_after_its_leaf_was_appended(
    ledger_store: LedgerStore,
    engine: Engine,
    key: Ed25519PrivateKey,
    migrated_database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _ledger_with_exported_checkpoint(ledger_store, engine, key)
    newer = list(ledger_store.append(audited("t4")).entries)  # the append transaction adds the leaves
    _rewrite_entry(migrated_database_url, newer[1].global_seq)
    with pytest.raises(CheckpointDamagedError, match=f"entry global_seq {newer[1].global_seq}"):
        create_checkpoint(engine, key)
    monkeypatch.setenv("LEDGER_DATABASE_URL", migrated_database_url)
    get_settings.cache_clear()
    try:  # the command line: tampering found is the thing checked failing (1), not an error (2)
        assert main(["checkpoint", "--key", str(tmp_path / "log.key")]) == 1
    finally:
        get_settings.cache_clear()
    assert f"entry global_seq {newer[1].global_seq}" in capsys.readouterr().err


def test_rewriting_the_tree_and_checkpoints_too_is_still_caught_by_the_exported_checkpoint(
    ledger_store: LedgerStore, engine: Engine, key: Ed25519PrivateKey, migrated_database_url: str
) -> None:
    exported = _ledger_with_exported_checkpoint(ledger_store, engine, key)
    _rewrite_entry(migrated_database_url, TAMPERED_SEQ)
    _superuser(
        migrated_database_url,
        ("DELETE FROM ledger_store.merkle_tiles", ()),
        ("DELETE FROM ledger_store.merkle_checkpoints", ()),
    )
    with engine.begin() as connection:
        catch_up_tree(connection)
    create_checkpoint(engine, key)  # the key holder re-signs the rewritten history
    problems = verify_checkpoints(engine, public_key=key.public_key(), external_notes=[("cp.note", exported)])
    codes = {p.code for p in problems}
    assert "split_view" in codes
    (mismatch,) = [p for p in problems if p.code == "checkpoint_root_mismatch"]
    assert mismatch.checkpoint == "exported checkpoint cp.note"
    assert "rewritten too" in mismatch.message


def test_verify_log_command_reports_the_tampered_entry(
    ledger_store: LedgerStore,
    engine: Engine,
    key: Ed25519PrivateKey,
    migrated_database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "cp.note").write_text(_ledger_with_exported_checkpoint(ledger_store, engine, key))
    submission = _rewrite_entry(migrated_database_url, TAMPERED_SEQ)
    monkeypatch.setenv("LEDGER_DATABASE_URL", migrated_database_url)
    get_settings.cache_clear()
    try:
        args = [
            "verify-log",
            "--public-key",
            str(tmp_path / "log.key.pub"),
            "--checkpoint",
            str(tmp_path / "cp.note"),
        ]
        assert main(args) == 1
        assert main(["prove", str(TAMPERED_SEQ)]) == 1
    finally:
        get_settings.cache_clear()
    out = capsys.readouterr()
    assert f"entry global_seq {TAMPERED_SEQ}, submission {submission}" in out.out
    assert "does not verify against checkpoint" in out.err


def test_after_a_re_signed_rewrite_the_range_is_possible_and_bounded_by_exported_checkpoints_only(
    ledger_store: LedgerStore, engine: Engine, key: Ed25519PrivateKey, migrated_database_url: str
) -> None:
    ledger_store.append(audited("t1"))
    early = create_checkpoint(engine, key)  # exported: 6 entries, before the tampered one
    ledger_store.append(audited("t2"))
    middle = create_checkpoint(engine, key)  # stays in the database only: 12 entries
    ledger_store.append(audited("t3"))
    exported = create_checkpoint(engine, key).note
    size = early.tree_size + 12
    assert (early.tree_size, middle.tree_size) == (6, 12) and early.tree_size < TAMPERED_SEQ
    _rewrite_entry(migrated_database_url, TAMPERED_SEQ)
    _superuser(
        migrated_database_url,
        ("DELETE FROM ledger_store.merkle_tiles", ()),
        ("DELETE FROM ledger_store.merkle_checkpoints", ()),
    )
    with engine.begin() as connection:
        catch_up_tree(connection)
    create_checkpoint(engine, key)  # the key holder re-signs the rewritten history at the same size
    notes = [("early.note", early.note), ("cp.note", exported)]
    problems = verify_checkpoints(engine, public_key=key.public_key(), external_notes=notes)
    (mismatch,) = [p for p in problems if p.code == "checkpoint_root_mismatch"]
    assert (
        f"has global_seq in {early.tree_size + 1}..{size} (exported checkpoint early.note" in mismatch.message
    )
    only_final = verify_checkpoints(
        engine, public_key=key.public_key(), external_notes=[("cp.note", exported)]
    )
    (mismatch,) = [p for p in only_final if p.code == "checkpoint_root_mismatch"]
    assert f"has global_seq in 1..{size};" in mismatch.message  # was "global_seq in {size + 1}..{size}"
