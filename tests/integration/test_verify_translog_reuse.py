"""``ledger verify`` hands the log check the leaves its ledger pass proved; the log check must
report exactly what it reports on its own, whatever was tampered with (every tampering runs as the
database superuser with the append-only triggers bypassed)."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Engine

from ledger.store.hashing import entry_hash, payload_hash
from ledger.store.ledger_store import LedgerStore
from ledger.translog.checkpoints import create_checkpoint
from ledger.translog.verify import verify_checkpoints
from ledger.verify.runner import run_verify
from tests.helpers.database import query, tamper
from tests.helpers.ledger_factories import audited

pytestmark = pytest.mark.integration


def _forge(url: str, seq: int, *, rehash: bool) -> str:
    """Change entry ``seq``'s payload; with ``rehash`` its payload_hash and entry_hash follow."""
    [row] = query(
        url,
        "SELECT submission_id, stream_seq, kind, prev_hash, engine_version, payload_canonical "
        "FROM ledger_store.entries WHERE global_seq = %(g)s",
        {"g": seq},
    )
    submission, stream_seq, kind, prev_hash, version, payload = row
    forged = payload[:-1] + ',"zz_forged":true}'
    if rehash:
        new_hash = entry_hash(submission, stream_seq, kind, payload_hash(forged), prev_hash, version)
        tamper(
            url,
            "UPDATE ledger_store.entries SET payload_canonical = %(t)s, payload_hash = %(p)s, "
            "entry_hash = %(e)s WHERE global_seq = %(g)s",
            {"t": forged, "p": payload_hash(forged), "e": new_hash, "g": seq},
        )
    else:
        tamper(
            url,
            "UPDATE ledger_store.entries SET payload_canonical = %(t)s WHERE global_seq = %(g)s",
            {"t": forged, "g": seq},
        )
    return str(submission)


def _translog_of_run_verify(engine: Engine, key: Ed25519PrivateKey) -> list[tuple[str, str, int | None]]:
    report = run_verify(engine, public_key=key.public_key())
    return sorted(
        (p.code.removeprefix("translog."), p.message, p.global_seq)
        for p in report.problems
        if p.source == "translog"
    )


def _translog_alone(engine: Engine, key: Ed25519PrivateKey) -> list[tuple[str, str, int | None]]:
    return sorted(
        (p.code, p.message, p.global_seq) for p in verify_checkpoints(engine, public_key=key.public_key())
    )


def test_reused_leaves_give_the_log_check_its_own_findings(
    ledger_store: LedgerStore, engine: Engine, key: Ed25519PrivateKey, migrated_database_url: str
) -> None:
    url = migrated_database_url
    for name in ("r1", "r2", "r3", "r4"):
        ledger_store.append(audited(name))
    create_checkpoint(engine, key)
    assert _translog_of_run_verify(engine, key) == _translog_alone(engine, key) == []
    [[entries]] = query(url, "SELECT count(*) FROM ledger_store.entries")
    per_submission = entries // 4

    rehashed = _forge(url, 2, rehash=True)  # the ledger pass proves its (new) hashes: a proven leaf
    _forge(url, per_submission + 2, rehash=False)  # stored hashes disagree: read and checked again
    orphan_seq = 2 * per_submission + 2  # its submission row removed: the ledger pass never sees it
    orphan = _forge(url, orphan_seq, rehash=True)
    tamper(url, "DELETE FROM ledger_store.submissions WHERE submission_id = %(s)s", {"s": orphan})

    reused, alone = _translog_of_run_verify(engine, key), _translog_alone(engine, key)

    assert reused == alone
    codes = {(code, seq) for code, _, seq in alone}
    assert {("leaf_mismatch", 2), ("payload_hash_mismatch", per_submission + 2)} <= codes
    assert ("leaf_mismatch", orphan_seq) in codes
    assert any(rehashed in message for code, message, _ in alone if code == "leaf_mismatch")
