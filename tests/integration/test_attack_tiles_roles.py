"""More attacks on ``merkle_tiles``: the writer role's UPDATEs, the reader's locks, a tile cut to a
non-multiple of 32 bytes, a hash rewritten between an append and the next checkpoint, the CLI on a
tampered log, hostile tile paths over HTTP, and revision 0007 on a tampered ``merkle_nodes``."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.db import reader_engine
from ledger.connect import create_ledger_engine, libpq_url
from ledger.errors import LedgerDamagedError
from ledger.migration import downgrade, upgrade
from ledger.store.ledger_store import LedgerStore
from ledger.translog.checkpoints import CheckpointDamagedError, create_checkpoint
from ledger.translog.keys import generate_key_files, load_private_key
from ledger.translog.proving import ProofDamagedError, prove_entries
from ledger.translog.tree import tile_root
from ledger.translog.verify import verify_checkpoints
from tests.helpers.database import query, tamper
from tests.helpers.ledger_factories import audited
from tests.helpers.replay import build_ledger, ledger, ledger_json
from tests.integration.test_attack_tiles import Log, T, _mth

pytestmark = pytest.mark.integration

LAST = f"(SELECT max(idx) FROM {T} WHERE level = 0)"


@pytest.fixture
def log(migrated_database_url: str, tmp_path: Path) -> Iterator[Log]:
    build_ledger(migrated_database_url, copies=3)
    generate_key_files(tmp_path / "log.key")
    key = load_private_key(tmp_path / "log.key")
    engine = create_ledger_engine(migrated_database_url)
    size = create_checkpoint(engine, key).tree_size
    yield Log(migrated_database_url, engine, key, size)
    engine.dispose()


def _errors(log: Log) -> list[str]:
    return [
        p.code
        for p in verify_checkpoints(log.engine, public_key=log.key.public_key())
        if p.severity == "error"
    ]


@pytest.mark.parametrize(
    "statement",
    [
        # shrink the partial tile
        f"UPDATE {T} SET width = width - 1, hashes = substring(hashes FROM 1 FOR octet_length(hashes) - 32) "
        f"WHERE level = 0 AND idx = {LAST}",
        # widen it, changing a stored hash on the way
        f"UPDATE {T} SET width = width + 1, hashes = set_byte(hashes, 0, get_byte(hashes, 0) # 1) || sha256('x') "
        f"WHERE level = 0 AND idx = {LAST}",
        # rewrite a full tile, keeping its width
        f"UPDATE {T} SET hashes = set_byte(hashes, 5, get_byte(hashes, 5) # 1) WHERE level = 0 AND idx = 0",
        # move tiles
        f"UPDATE {T} SET idx = idx + 1 WHERE level = 0 AND idx = {LAST}",
        f"UPDATE {T} SET level = 2 WHERE level = 1",
        # widen a full tile / widen without the bytes
        f"UPDATE {T} SET width = 257, hashes = hashes || sha256('x') WHERE level = 0 AND idx = 0",
        f"UPDATE {T} SET width = width + 1 WHERE level = 0 AND idx = {LAST}",
        # the append path's own statement, rewriting a full tile
        f"INSERT INTO {T} SELECT level, idx, width, set_byte(hashes, 0, 0) FROM {T} WHERE level = 0 AND idx = 0 "
        "ON CONFLICT (level, idx) DO UPDATE SET width = EXCLUDED.width, hashes = EXCLUDED.hashes",
        f"DELETE FROM {T} WHERE level = 1",
        f"TRUNCATE {T}",
    ],
)
def test_the_writer_role_cannot_rewrite_move_or_shrink_a_tile(log: Log, statement: str) -> None:
    before = query(log.url, f"SELECT level, idx, width, hashes FROM {T} ORDER BY level, idx")
    with pytest.raises(
        (psycopg.errors.RaiseException, psycopg.errors.CheckViolation, psycopg.errors.InsufficientPrivilege)
    ):
        query(log.url, statement, role="ledger_writer")
    assert query(log.url, f"SELECT level, idx, width, hashes FROM {T} ORDER BY level, idx") == before


def test_the_reader_role_can_neither_write_nor_lock_tiles(log: Log) -> None:
    for statement in (
        f"SELECT * FROM {T} FOR NO KEY UPDATE",
        f"SELECT * FROM {T} FOR UPDATE",
        f"LOCK TABLE {T} IN ROW EXCLUSIVE MODE",
        f"LOCK TABLE {T} IN ACCESS EXCLUSIVE MODE",
        f"UPDATE {T} SET width = width WHERE false",
        f"INSERT INTO {T} VALUES (7, 0, 1, sha256('x')) ON CONFLICT DO NOTHING",
        "LOCK TABLE ledger_store.append_lock IN ROW SHARE MODE",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            query(log.url, statement, role="ledger_reader")


def test_a_tile_cut_to_a_non_multiple_of_32_bytes_fails_closed(log: Log) -> None:
    cut = f"UPDATE {T} SET hashes = substring(hashes FROM 1 FOR octet_length(hashes) - 5) WHERE level = 0 AND idx = {LAST}"
    with pytest.raises(psycopg.errors.CheckViolation):  # even the owner with triggers off
        tamper(log.url, cut)
    with psycopg.connect(libpq_url(log.url)) as conn:  # the owner drops the check first
        conn.execute(f"ALTER TABLE {T} DROP CONSTRAINT ck_merkle_tiles_hashes_length")
    tamper(log.url, cut)
    assert "leaf_mismatch" in _errors(log)
    with pytest.raises(CheckpointDamagedError):
        create_checkpoint(log.engine, log.key)
    engine = reader_engine(log.url)
    try:
        with TestClient(create_app(engine), raise_server_exceptions=False) as client:
            tile = f"/tile/0/{log.size // 256:03d}.p/{log.size % 256}"
            assert log.size % 2 == 0  # so the last leaf is the sibling in the proof of the one before
            for path in (tile, tile.replace("/0/", "/entries/"), f"/v1/entries/{log.size - 1}/proof"):
                response = client.get(path)
                assert (response.status_code, response.json()["code"]) == (500, "log_damaged"), path
    finally:
        engine.dispose()


def test_bytes_beyond_a_tiles_width_are_named_by_verify(log: Log) -> None:
    """Junk after ``32 * width`` is served by nothing, but the next widening would be refused for it."""
    with psycopg.connect(libpq_url(log.url)) as conn:  # the owner drops the check first
        conn.execute(f"ALTER TABLE {T} DROP CONSTRAINT ck_merkle_tiles_hashes_length")
    tamper(log.url, f"UPDATE {T} SET hashes = hashes || sha256('junk') WHERE level = 0 AND idx = {LAST}")
    problems = verify_checkpoints(log.engine, public_key=log.key.public_key())
    assert [p.message for p in problems if p.code == "tile_layout"] == [
        "level 0 holds 1 tile(s) whose length is not 32 bytes per hash of their width"
    ]


def test_a_tile_rewritten_with_the_checkpoint_row_to_match_is_still_refused(log: Log) -> None:
    """The owner flips a leaf hash and rewrites the checkpoint row's root to the tree's new root;
    the signed note still holds the true root, so no tile or proof is bound to the forged one."""
    tamper(
        log.url,
        f"UPDATE {T} SET hashes = set_byte(hashes, 7, get_byte(hashes, 7) # 1) WHERE level = 0 AND idx = 0",
    )
    with log.engine.connect() as connection:
        forged = tile_root(
            connection,
            0,
            0,
            bytes(query(log.url, f"SELECT hashes FROM {T} WHERE level = 0 AND idx = 0")[0][0]),
            log.size,
        )
    tamper(log.url, "UPDATE ledger_store.merkle_checkpoints SET root_hash = %(root)s", {"root": forged})
    engine = reader_engine(log.url)
    try:
        with TestClient(create_app(engine), raise_server_exceptions=False) as client:
            for path in (
                "/tile/0/000",
                "/tile/entries/000",
                "/v1/entries/2/proof",
                "/v1/consistency?from=1&to=256",
            ):
                response = client.get(path)
                assert (response.status_code, response.json()["code"]) == (500, "log_damaged"), path
    finally:
        engine.dispose()
    with log.engine.connect() as connection, pytest.raises(ProofDamagedError, match="differs from its note"):
        prove_entries(connection, "2")
    assert "checkpoint_row_mismatch" in _errors(log)


def test_a_hash_rewritten_between_an_append_and_the_next_checkpoint_is_never_signed(log: Log) -> None:
    """The new level-1 hash is read back by root_at and by the consistency proof alike, so only a
    root rebuilt from the rechecked leaves catches it."""
    with LedgerStore(log.url) as store:
        for i in range(3):
            store.append(audited(f"grow-{i}", steps=200))
    level1 = query(log.url, f"SELECT width FROM {T} WHERE level = 1 AND idx = 0")[0][0]
    assert (level1 - 1) * 256 >= log.size  # a new level-1 hash, over leaves all beyond the checkpoint
    byte = (level1 - 1) * 32
    tamper(
        log.url,
        f"UPDATE {T} SET hashes = set_byte(hashes, {byte}, get_byte(hashes, {byte}) # 1) WHERE level = 1",
    )
    with pytest.raises(CheckpointDamagedError, match="not the one its leaves hash to"):
        create_checkpoint(log.engine, log.key)
    assert "node_mismatch" in _errors(log)


def test_the_cli_on_a_tampered_tile_exits_1_with_one_line_and_no_trace(log: Log, tmp_path: Path) -> None:
    tamper(log.url, f"UPDATE {T} SET hashes = set_byte(hashes, 40, get_byte(hashes, 40) # 1) WHERE level = 1")
    env = {"LEDGER_SIGNING_KEY": str(tmp_path / "log.key")}
    code, report = ledger_json(log.url, "verify", env=env)
    assert code == 1 and report["summary"]["translog_checked"] is True
    assert any(p["code"].startswith("translog.") for p in report["problems"] if p["severity"] == "error")
    for args in (["verify-log"], ["checkpoint"], ["prove", "4"], ["prove", "--consistency", "256", "512"]):
        done = ledger(log.url, *args, env=env)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr + done.stdout, args
        if args != ["verify-log"]:
            assert len(done.stderr.strip().splitlines()) == 1, (args, done.stderr)


@pytest.mark.parametrize(
    "path",
    [
        "/tile/0/-01",
        "/tile/-1/000",
        "/tile/0/abc",
        "/tile/0/000.p/0",
        "/tile/0/000.p/256",
        "/tile/0/000.p/257",
        "/tile/0/000.p/-1",
        "/tile/0/000.p/001",
        "/tile/0/.p/0",
        "/tile/0/000.p/",
        "/tile/0/000.p",
        "/tile/8/000",
        "/tile/99/000",
        "/tile/65536/000",
        "/tile/0/x999/x999/x999/x999/x999/x999/x999/999",
        "/tile/0/x018/x014/x398/x509/x481/x984",  # 2**54 + 1 tiles in
        "/tile/0/x999/x999/x999/x999/x999/999",
        "/tile/entries/x999/x999/x999/x999/x999/999.p/255",
        "/tile/0/000%00",
        "/tile/0/%ED%A0%80",
        "/tile/0/0000",
        "/tile/0/x000/000",
        "/tile//000",
        "/tile/0//000",
        "/tile/0/000/",
        "/tile/entries/000.p/9999999999999999999999999",
    ],
)
def test_hostile_tile_paths_answer_a_404_problem(log: Log, path: str) -> None:
    engine = reader_engine(log.url)
    try:
        with TestClient(create_app(engine), raise_server_exceptions=False) as client:
            response = client.get(path)
    finally:
        engine.dispose()
    assert response.status_code == 404, (path, response.status_code, response.text)
    assert response.headers["content-type"] == "application/problem+json"
    assert "Traceback" not in response.text


def test_the_0007_upgrade_carries_a_tampered_node_table_and_verify_then_names_the_leaf(log: Log) -> None:
    downgrade(log.url, "0006")
    tamper(
        log.url, "UPDATE ledger_store.merkle_nodes SET hash = sha256('forged') WHERE level = 0 AND idx = 3"
    )
    tamper(
        log.url, "UPDATE ledger_store.merkle_nodes SET hash = sha256('forged') WHERE level = 8 AND idx = 1"
    )
    upgrade(log.url)
    problems = verify_checkpoints(log.engine, public_key=log.key.public_key())
    leaf = [p for p in problems if p.code == "leaf_mismatch"]
    assert [p.global_seq for p in leaf] == [4]
    assert any(p.code == "node_mismatch" for p in problems)
    leaves = log.leaves()
    assert _mth(leaves[: log.size]) != hashlib.sha256(b"").digest()  # the truth the tiles no longer give
    with pytest.raises(CheckpointDamagedError):
        create_checkpoint(log.engine, log.key)


def test_a_writer_that_widens_a_level_1_tile_with_a_bogus_hash_is_named_and_stops_appends(log: Log) -> None:
    """The trigger lets any widening through; verify names the hash beyond the tree, and the append
    that reaches it is refused as damage, never a silently wrong tree."""
    with psycopg.connect(libpq_url(log.url)) as conn:
        conn.execute("SET ROLE ledger_writer")
        conn.execute(f"UPDATE {T} SET width = width + 1, hashes = hashes || sha256('bogus') WHERE level = 1")
    assert "tile_layout" in _errors(log)
    with LedgerStore(log.url) as store, pytest.raises(LedgerDamagedError, match="ledger is damaged"):
        for i in range(3):  # enough leaves to complete the next level-1 hash
            store.append(audited(f"reach-{i}", steps=200))
    assert "tile_layout" in _errors(log)
