"""The new entries go to the server as binary COPY (ledger.store.copy_binary) on a UTF8 or
SQL_ASCII connection, and as text COPY for any other client encoding: either way the stored
columns are the draft's values exactly."""

from __future__ import annotations

import json

import pytest

from ledger.connect import create_ledger_engine
from ledger.store.append import prepare
from ledger.store.ledger_store import LedgerStore
from tests.helpers.database import query
from tests.helpers.ledger_factories import audited

pytestmark = pytest.mark.integration

# characters COPY text escapes, JSON escapes, array literals quote, and non-ASCII ones LATIN1 holds
EXPECTED = {None: "utf-8", "UTF8": "utf-8", "LATIN1": "iso8859-1"}
MARKET = 'mé\t"q"\\{a,b}\n%d ÿ'


@pytest.mark.parametrize("encoding", [None, "UTF8", "LATIN1"])  # SQLAlchemy cannot connect with SQL_ASCII
def test_stored_rows_are_the_drafts_values(migrated_database_url: str, encoding: str | None) -> None:
    url = migrated_database_url
    connect_args = {} if encoding is None else {"client_encoding": encoding}
    engine = create_ledger_engine(url, connect_args=connect_args, pool_size=1)
    drafts = [audited("k1", market_id=MARKET, steps=3), audited("k2", steps=1), audited("k3", steps=0)]
    try:
        with engine.connect() as probe:  # psycopg's name of the connection's client encoding
            assert probe.connection.driver_connection.info.encoding == EXPECTED[encoding]
        with LedgerStore(engine, role="ledger_writer") as store:
            results = store.append_batch(drafts)
            assert [r.status for r in results] == ["created"] * 3
            assert [r.status for r in store.append_batch(drafts)] == ["existing"] * 3
    finally:
        engine.dispose()
    rows = query(
        url,
        "SELECT global_seq, submission_id, stream_seq, kind, payload_canonical, payload_hash, prev_hash, "
        "entry_hash, engine_version, step_index, step_id, step_type, evidence_ids, step_hash, canonical_step "
        "FROM ledger_store.entries ORDER BY global_seq",
    )
    expected = []
    seq = 1
    for draft in drafts:
        offer = prepare(draft)
        steps = {row[0]: row[1:] for row in offer.step_rows}
        for position, entry in enumerate(offer.entries):
            step = steps.get(position)
            body = (None,) * 6 if step is None else step
            expected.append((seq, offer.submission_id, *entry, draft.engine_version, *body))
            seq += 1
    assert [tuple(row) for row in rows] == expected
    assert json.dumps(MARKET, ensure_ascii=False)[1:-1] in rows[0][4]  # the received payload
