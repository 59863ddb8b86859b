"""Attacks on the stored tiles (``ledger_store.merkle_tiles``) by the table's owner, triggers bypassed.

After each tampering, every surface must fail closed: ``verify_checkpoints`` reports an error,
a new checkpoint is refused or signs the root the entries hash to, and every proof, tile and root
the Python API or ``ledger serve`` hands out is the one the entries give (else an error or a 500
problem, never a trace). The truth is recomputed here from the entries, with hashlib only.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.app import create_app
from api.db import reader_engine
from api.tiles import TileRef, tile_path
from engine.merkle.rfc6962 import verify_consistency, verify_inclusion
from ledger.connect import create_ledger_engine
from ledger.errors import LedgerError
from ledger.store.ledger_store import LedgerStore
from ledger.translog.checkpoints import CheckpointError, create_checkpoint
from ledger.translog.keys import generate_key_files, load_private_key
from ledger.translog.proving import ProofError, prove_consistency, prove_entries
from ledger.translog.verify import verify_checkpoints
from tests.helpers.database import query, tamper
from tests.helpers.ledger_factories import audited
from tests.helpers.replay import build_ledger

pytestmark = pytest.mark.integration

T = "ledger_store.merkle_tiles"


def _leaf(entry_hash: str) -> bytes:
    return hashlib.sha256(b"\x00" + bytes.fromhex(entry_hash[2:])).digest()


def _mth(leaves: list[bytes]) -> bytes:
    if len(leaves) == 1:
        return leaves[0]
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + _mth(leaves[:k]) + _mth(leaves[k:])).digest()


@dataclass
class Log:
    url: str
    engine: Engine
    key: Ed25519PrivateKey
    size: int  # the signed checkpoint's size

    def leaves(self) -> list[bytes]:
        return [
            _leaf(h)
            for (h,) in query(self.url, "SELECT entry_hash FROM ledger_store.entries ORDER BY global_seq")
        ]

    def true_tile(self, level: int, n: int, width: int) -> bytes:
        leaves, span = self.leaves(), 256**level
        first = n * 256
        return b"".join(_mth(leaves[(first + i) * span : (first + i + 1) * span]) for i in range(width))


@pytest.fixture
def log(migrated_database_url: str, tmp_path: Path) -> Iterator[Log]:
    build_ledger(migrated_database_url, copies=3)
    generate_key_files(tmp_path / "log.key")
    key = load_private_key(tmp_path / "log.key")
    engine = create_ledger_engine(migrated_database_url)
    size = create_checkpoint(engine, key).tree_size
    assert 512 < size < 65536 and size % 256  # full and partial level-0 tiles, one partial level-1 tile
    yield Log(migrated_database_url, engine, key, size)
    engine.dispose()


def _flip(level: int, idx: int, byte: int) -> str:
    return f"UPDATE {T} SET hashes = set_byte(hashes, {byte}, get_byte(hashes, {byte}) # 1) WHERE level = {level} AND idx = {idx}"


LAST = f"(SELECT max(idx) FROM {T} WHERE level = 0)"
TAMPERINGS = {
    "flip a hash byte in a full level-0 tile": [_flip(0, 0, 3 * 32 + 7)],
    "flip a hash byte in the partial level-0 tile": [
        f"UPDATE {T} SET hashes = set_byte(hashes, 40, get_byte(hashes, 40) # 1) WHERE level = 0 AND idx = {LAST}"
    ],
    "flip the last hash byte of the partial level-0 tile": [
        f"UPDATE {T} SET hashes = set_byte(hashes, octet_length(hashes) - 1, "
        f"get_byte(hashes, octet_length(hashes) - 1) # 1) WHERE level = 0 AND idx = {LAST}"
    ],
    "flip a hash byte in the partial level-1 tile": [_flip(1, 0, 32 + 1)],
    "widen the partial level-0 tile with a bogus hash": [
        f"UPDATE {T} SET width = width + 1, hashes = hashes || sha256('x') WHERE level = 0 AND idx = {LAST}"
    ],
    "narrow the partial level-0 tile": [
        f"UPDATE {T} SET width = width - 1, hashes = substring(hashes FROM 1 FOR octet_length(hashes) - 32) "
        f"WHERE level = 0 AND idx = {LAST}"
    ],
    "narrow the partial level-1 tile": [
        f"UPDATE {T} SET width = width - 1, hashes = substring(hashes FROM 1 FOR octet_length(hashes) - 32) "
        "WHERE level = 1 AND idx = 0"
    ],
    "delete a full level-0 tile": [f"DELETE FROM {T} WHERE level = 0 AND idx = 0"],
    "delete every tile": [f"DELETE FROM {T}"],
    "delete the partial level-1 tile": [f"DELETE FROM {T} WHERE level = 1 AND idx = 0"],
    "add a bogus level-0 tile beyond the tree": [f"INSERT INTO {T} VALUES (0, 40, 1, sha256('bogus'))"],
    "add a bogus level-1 tile beyond the tree": [f"INSERT INTO {T} VALUES (1, 3, 1, sha256('bogus'))"],
    "add a bogus level-2 tile": [f"INSERT INTO {T} VALUES (2, 0, 1, sha256('bogus'))"],
    "swap two full level-0 tiles": [
        f"UPDATE {T} SET idx = 1000 WHERE level = 0 AND idx = 0",
        f"UPDATE {T} SET idx = 0 WHERE level = 0 AND idx = 1",
        f"UPDATE {T} SET idx = 1 WHERE level = 0 AND idx = 1000",
    ],
    "move the partial level-0 tile one index up": [
        f"UPDATE {T} SET idx = idx + 1 WHERE level = 0 AND idx = {LAST}"
    ],
    "move a level-0 tile to level 1": [f"UPDATE {T} SET level = 1, idx = 5 WHERE level = 0 AND idx = 1"],
}


def _apply(url: str, statements: list[str]) -> None:
    for statement in statements:
        tamper(url, statement)


def _errors(log: Log) -> list[str]:
    problems = verify_checkpoints(log.engine, public_key=log.key.public_key())
    return [p.render() for p in problems if p.severity == "error"]


def _check_python_surfaces(log: Log) -> None:
    leaves = log.leaves()
    with log.engine.connect() as connection:
        for seq in (1, 4, 256, 300, log.size):
            try:
                bundle = prove_entries(connection, str(seq))
            except ProofError:
                continue
            assert isinstance(bundle, dict)
            path = [bytes.fromhex(h[2:]) for h in bundle["inclusion_path"]]
            assert verify_inclusion(leaves[seq - 1], seq - 1, log.size, path, _mth(leaves[: log.size]))
        for old, new in ((1, log.size), (4, 300), (256, 512), (256, 300), (300, log.size)):
            try:
                proof = prove_consistency(connection, old, new)
            except ProofError:
                continue
            old_root, new_root = _mth(leaves[:old]), _mth(leaves[:new])
            assert (proof["old_root"], proof["new_root"]) == ("0x" + old_root.hex(), "0x" + new_root.hex())
            path = [bytes.fromhex(h[2:]) for h in proof["consistency_path"]]
            assert verify_consistency(old, new, old_root, new_root, path)
    with LedgerStore(log.url) as store, contextlib.suppress(LedgerError):  # refusing is failing closed
        store.append(audited("after-tampering"))
    try:
        signed = create_checkpoint(log.engine, log.key)
    except CheckpointError:
        return
    leaves = log.leaves()
    assert signed.root_hash == _mth(leaves[: signed.tree_size]), "signed a root the entries do not give"


def _check_http(log: Log) -> None:
    leaves = log.leaves()
    engine = reader_engine(log.url)
    try:
        with TestClient(create_app(engine), raise_server_exceptions=False) as client:
            refs = [TileRef(0, 0, 256), TileRef(0, 1, 256), TileRef(0, log.size // 256, log.size % 256)]
            refs += [TileRef(0, log.size // 256, 1), TileRef(1, 0, log.size // 256), TileRef(1, 0, 1)]
            refs += [TileRef(-1, 0, 256), TileRef(-1, log.size // 256, log.size % 256)]
            for ref in refs:
                response = client.get("/" + tile_path(ref))
                if response.status_code == 200:
                    if ref.level >= 0:
                        assert response.content == log.true_tile(ref.level, ref.n, ref.w), tile_path(ref)
                else:
                    assert response.status_code == 500 and response.json()["code"] == "log_damaged", (
                        response.text
                    )
            for seq in (1, 4, 256, 300, log.size):
                response = client.get(f"/v1/entries/{seq}/proof")
                if response.status_code == 200:
                    path = [bytes.fromhex(h[2:]) for h in response.json()["inclusion_path"]]
                    assert verify_inclusion(
                        leaves[seq - 1], seq - 1, log.size, path, _mth(leaves[: log.size])
                    )
                else:
                    assert response.status_code == 500 and response.json()["code"] == "log_damaged", (
                        response.text
                    )
            for old, new in ((4, 300), (256, 512), (256, 300), (1, log.size)):
                response = client.get("/v1/consistency", params={"from": old, "to": new})
                if response.status_code == 200:
                    body = response.json()
                    assert body["old_root"] == "0x" + _mth(leaves[:old]).hex()
                    assert body["new_root"] == "0x" + _mth(leaves[:new]).hex()
                else:
                    assert response.status_code in (404, 500), response.text
                    assert "Traceback" not in response.text
    finally:
        engine.dispose()


@pytest.mark.parametrize("name", sorted(TAMPERINGS))
def test_tampered_tiles_fail_closed_everywhere(log: Log, name: str) -> None:
    assert _errors(log) == []
    _apply(log.url, TAMPERINGS[name])
    assert _errors(log), f"verify-log passed after: {name}"
    _check_http(log)
    _check_python_surfaces(log)
    if not _errors(log):  # the appends repaired the tree from the entries: it must be exactly theirs
        for level, idx, width, hashes in query(log.url, f"SELECT level, idx, width, hashes FROM {T}"):
            assert bytes(hashes) == log.true_tile(level, idx, width), (level, idx)
