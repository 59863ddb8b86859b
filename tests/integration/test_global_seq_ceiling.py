"""A ``max(global_seq)`` set near the bigint maximum outside the append path stops appends.

Only a tampered ledger gets there (the sequence would need 9.2e18 entries). The binary COPY could
not even write the position (``struct.error``) and the text COPY's refusal looked like a data error
of the record, which the consumer would dead-letter record by record: a valid record is never
refused for the ledger's damage. ``LedgerDamagedError`` stops appends, nothing is written.
"""

from __future__ import annotations

import pytest

from ledger.errors import LedgerDamagedError
from ledger.store.ledger_store import LedgerStore
from tests.helpers.database import row_counts, tamper
from tests.helpers.ledger_factories import audited

pytestmark = pytest.mark.integration


def test_appends_stop_when_global_seq_would_pass_the_bigint_maximum(migrated_database_url: str) -> None:
    url = migrated_database_url
    with LedgerStore(url) as store:
        store.append_batch([audited("ceiling-1", steps=2)])
        tamper(
            url,
            "UPDATE ledger_store.entries SET global_seq = 9223372036854775807 - 3 "
            "WHERE global_seq = (SELECT max(global_seq) FROM ledger_store.entries)",
        )
        before = row_counts(url)
        with pytest.raises(LedgerDamagedError, match="global_seq would pass"):
            store.append_batch([audited("ceiling-2", steps=2)])
        assert row_counts(url) == before
