"""Follow-up entries on a stored submission's chain (``reasoning.verified``, ``replay.verified``)."""

from __future__ import annotations

import pytest

from ledger.errors import InvalidDraftError
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import EntryDraft, OffsetAdvance
from tests.helpers.database import chain_problems
from tests.helpers.ledger_factories import audited

pytestmark = pytest.mark.integration

VERIFIED = EntryDraft("reasoning.verified", {"status": "verified", "attempt": 1, "score": 0.5})


def test_follow_up_is_chained_after_the_expected_head(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    first = ledger_store.append(audited("k1"))
    ledger_store.append(audited("k2"))
    head = first.entries[-1]
    result = ledger_store.append_to_stream(
        first.submission_id, [VERIFIED], expected_stream_seq=head.stream_seq, engine_version="1.0.0"
    )
    assert result.status == "created"
    (entry,) = result.entries
    assert (entry.global_seq, entry.stream_seq, entry.prev_hash) == (13, head.stream_seq + 1, head.entry_hash)
    stored = ledger_store.get_submission("k1")
    assert stored is not None and stored.entries[-1].kind == "reasoning.verified"
    assert chain_problems(migrated_database_url) == []
    assert ledger_store.append(audited("k1")).status == "existing"  # a re-delivered bundle is still existing


def test_repeat_is_existing_and_a_moved_chain_is_stale(ledger_store: LedgerStore) -> None:
    first = ledger_store.append(audited("k1"))
    head = first.entries[-1].stream_seq
    created = ledger_store.append_to_stream(
        first.submission_id, [VERIFIED], expected_stream_seq=head, engine_version="1.0.0"
    )
    again = ledger_store.append_to_stream(
        first.submission_id, [VERIFIED], expected_stream_seq=head, engine_version="1.0.0"
    )
    assert again.status == "existing" and again.entries == created.entries
    other = EntryDraft("reasoning.verified", {"status": "fail_closed", "attempt": 1})
    stale = ledger_store.append_to_stream(
        first.submission_id, [other], expected_stream_seq=head, engine_version="1.0.0"
    )
    assert stale.status == "stale" and stale.entries == created.entries
    assert ledger_store.max_seq() == len(first.entries) + 1


def test_follow_ups_refuse_wrong_heads_and_kinds(ledger_store: LedgerStore) -> None:
    first = ledger_store.append(audited("k1"))
    with pytest.raises(InvalidDraftError, match="no entry at stream_seq"):
        ledger_store.append_to_stream(
            first.submission_id, [VERIFIED], expected_stream_seq=99, engine_version="1"
        )
    with pytest.raises(InvalidDraftError, match="may extend"):
        ledger_store.append_to_stream(
            first.submission_id,
            [EntryDraft("audit.completed", {})],
            expected_stream_seq=1,
            engine_version="1",
        )


def test_follow_up_as_writer_with_offsets(migrated_database_url: str) -> None:
    with LedgerStore(migrated_database_url, role="ledger_writer") as writer:
        first = writer.append(audited("k1"))
        result = writer.append_to_stream(
            first.submission_id,
            [VERIFIED],
            expected_stream_seq=first.entries[-1].stream_seq,
            engine_version="1.0.0",
            offsets=[OffsetAdvance("reasoning", "t", 0, 0, 1)],
        )
        assert result.status == "created"
        assert writer.load_offsets("reasoning", "t") == {0: 1}
