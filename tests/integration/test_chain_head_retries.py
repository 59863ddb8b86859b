"""Follow-up appends retried at a moved chain head: the reasoning worker and ``replay --record``
re-chain after the new head a bounded number of times, then fail closed with a clear error."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import pytest

from engine.version import ENGINE_VERSION
from ledger.errors import LedgerError
from ledger.reasoning.worker import STALE_TRIES
from ledger.replay.record import RECORD_TRIES, ReplayRecorder
from ledger.replay.runner import SubmissionReplay
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import EntryDraft, StreamAppendResult
from tests.helpers.reasoning import AT_OR_ABOVE, Stubs, by_submission, make_worker, submit

pytestmark = pytest.mark.integration


class MovingStore(LedgerStore):
    """A real store whose chain head moves (another ``replay.verified`` lands) before each of the
    first ``moves`` appends, as a concurrent writer would do."""

    def __init__(self, url: str, moves: int) -> None:
        super().__init__(url)
        self.moves = moves
        self.moved = 0

    def append_to_stream(
        self, submission_id: str, entries: Sequence[EntryDraft], **kwargs: Any
    ) -> StreamAppendResult:
        if self.moved < self.moves:
            self.moved += 1
            record = self.get_submission(submission_id)
            assert record is not None
            mover = EntryDraft("replay.verified", {"mover": self.moved})
            moved = super().append_to_stream(
                submission_id,
                [mover],
                expected_stream_seq=record.entries[-1].stream_seq,
                engine_version=ENGINE_VERSION,
            )
            assert moved.status == "created"
        return super().append_to_stream(submission_id, entries, **kwargs)


def _kinds(store: LedgerStore, submission_id: str) -> list[str]:
    record = store.get_submission(submission_id)
    assert record is not None
    return [entry.kind for entry in record.entries]


def _worker_pass(store: MovingStore) -> Any:
    with Stubs() as stubs:
        return asyncio.run(make_worker(store, stubs, concurrency=1).run_once())


def test_reasoning_worker_rechains_after_a_moved_head(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    submission_id = submit(ledger_store, AT_OR_ABOVE, event_id="moved-once", verify=True)
    store = MovingStore(migrated_database_url, moves=STALE_TRIES - 1)
    try:
        stats = _worker_pass(store)
    finally:
        store.close()
    assert stats.appended == 1 and stats.errors == 0
    assert _kinds(ledger_store, submission_id)[-1] == "reasoning.verified"


def test_reasoning_worker_fails_closed_when_the_head_keeps_moving(
    ledger_store: LedgerStore, migrated_database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    submission_id = submit(ledger_store, AT_OR_ABOVE, event_id="kept-moving", verify=True)
    store = MovingStore(migrated_database_url, moves=STALE_TRIES)
    try:
        with caplog.at_level(logging.ERROR, logger="ledger.reasoning.worker"):
            stats = _worker_pass(store)
    finally:
        store.close()
    assert stats.appended == 0 and stats.errors == 1  # nothing recorded; the item stays open
    assert by_submission(ledger_store).get(submission_id, []) == []
    assert _kinds(ledger_store, submission_id).count("replay.verified") == STALE_TRIES
    assert any(f"kept moving; gave up after {STALE_TRIES} tries" in str(r.exc_info) for r in caplog.records)


def _outcome(store: LedgerStore, submission_id: str) -> SubmissionReplay:
    record = store.get_submission(submission_id)
    assert record is not None
    head = record.entries[-1]
    return SubmissionReplay(
        submission_id=submission_id,
        market_id=None,
        first_seq=record.entries[0].global_seq,
        status="identical",
        recorded_engine_version=ENGINE_VERSION,
        steps=0,
        head_stream_seq=head.stream_seq,
    )


def _recorder(store: LedgerStore, url: str, moves: int) -> ReplayRecorder:
    recorder = ReplayRecorder(store.engine, live=False)
    recorder.store = MovingStore(url, moves=moves)
    return recorder


def test_replay_recorder_rechains_after_a_moved_head(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    submission_id = submit(ledger_store, AT_OR_ABOVE, event_id="record-moved", verify=False)
    recorder = _recorder(ledger_store, migrated_database_url, moves=RECORD_TRIES - 1)
    try:
        recorder(_outcome(ledger_store, submission_id))
    finally:
        recorder.store.close()
    assert recorder.counts == {"created": 1, "existing": 0}
    record = ledger_store.get_submission(submission_id)
    assert record is not None and record.entries[-1].payload["status"] == "identical"


def test_replay_recorder_fails_closed_when_the_head_keeps_moving(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    submission_id = submit(ledger_store, AT_OR_ABOVE, event_id="record-kept-moving", verify=False)
    recorder = _recorder(ledger_store, migrated_database_url, moves=RECORD_TRIES)
    try:
        with pytest.raises(
            LedgerError, match=f"not recorded: its chain kept moving \\({RECORD_TRIES} tries\\)"
        ):
            recorder(_outcome(ledger_store, submission_id))
    finally:
        recorder.store.close()
    assert recorder.counts == {"created": 0, "existing": 0}
    record = ledger_store.get_submission(submission_id)
    assert record is not None
    assert [entry.payload for entry in record.entries if entry.kind == "replay.verified"] == [
        {"mover": n} for n in range(1, RECORD_TRIES + 1)
    ]
