"""Source-log incarnations and dead-letter coordinates in the store, and migration 0004 on a live ledger."""

from __future__ import annotations

import dataclasses

import psycopg
import pytest

from ledger.connect import libpq_url
from ledger.errors import SourceLogUndecidedError, StaleOffsetError
from ledger.migration import current_revision, downgrade, head_revision, upgrade
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import DeadLetterCoordinates, EntryDraft, OffsetAdvance, OperationalInfo
from ledger.store.source_log import SourceIdentity
from tests.helpers.database import chain_problems, query
from tests.helpers.ledger_factories import audited, rejected
from tests.helpers.replay import corpus_drafts, ledger_json

pytestmark = pytest.mark.integration

GROUP, TOPIC = "g", "evidence-bundles"
FIRST = SourceIdentity("cluster-a", "00000000-0000-7000-8000-000000000001")
RECREATED = SourceIdentity("cluster-a", "00000000-0000-7000-8000-000000000002")
REBUILT = SourceIdentity("cluster-b", "00000000-0000-7000-8000-000000000003")


def advance(partition: int, start: int, end: int, incarnation: int | None) -> OffsetAdvance:
    return OffsetAdvance(GROUP, TOPIC, partition, start, end, incarnation)


def test_incarnations_are_recorded_reset_the_offsets_and_fence_older_batches(
    migrated_database_url: str,
) -> None:
    with LedgerStore(migrated_database_url, role="ledger_writer") as store:
        first = store.resolve_source(GROUP, TOPIC, FIRST, host="h")
        assert (first.incarnation.number, first.incarnation.reason, first.created) == (1, "first", True)
        store.append_batch([audited("k1")], [advance(0, 0, 5, 1), advance(1, 0, 3, 1)])
        again = store.resolve_source(GROUP, TOPIC, FIRST)
        assert (again.incarnation.number, again.created, again.offsets) == (1, False, {0: 5, 1: 3})

        second = store.resolve_source(GROUP, TOPIC, RECREATED, host="h")
        assert (second.incarnation.number, second.incarnation.reason, second.offsets) == (
            2,
            "topic_recreated",
            {0: 0, 1: 0},
        )
        assert store.load_offsets(GROUP, TOPIC) == {0: 0, 1: 0}
        with pytest.raises(StaleOffsetError):  # a zombie still reading the old log is fenced
            store.append_batch([audited("k2")], [advance(0, 5, 9, 1)])
        assert store.get_submission("k2") is None
        store.append_batch([audited("k2")], [advance(0, 0, 2, 2), advance(2, 0, 1, 2)])
        third = store.resolve_source(GROUP, TOPIC, REBUILT)
        assert (third.incarnation.number, third.incarnation.reason) == (3, "cluster_changed")
        with pytest.raises(SourceLogUndecidedError) as undecided:  # an old cluster came back
            store.resolve_source(GROUP, TOPIC, FIRST)
        assert undecided.value.reason == "past_incarnation"
        with pytest.raises(SourceLogUndecidedError):
            store.resolve_source(GROUP, TOPIC, SourceIdentity("cluster-a", ""))
        assert store.current_incarnation(GROUP, TOPIC) == third.incarnation

    rows = query(
        migrated_database_url,
        "SELECT incarnation, reason, previous_offsets FROM ledger.source_incarnations ORDER BY incarnation",
    )
    assert rows == [
        (1, "first", {}),
        (2, "topic_recreated", {"0": 5, "1": 3}),
        (3, "cluster_changed", {"0": 2, "1": 0, "2": 1}),
    ]
    offsets = query(
        migrated_database_url,
        "SELECT kafka_partition, next_offset, incarnation FROM ledger.consumer_offsets ORDER BY 1",
    )
    assert offsets == [(0, 0, 3), (1, 0, 3), (2, 0, 3)]


def test_offsets_still_only_move_forward_within_an_incarnation(migrated_database_url: str) -> None:
    with LedgerStore(migrated_database_url) as store:
        store.resolve_source(GROUP, TOPIC, FIRST)
        store.append_batch([], [advance(0, 0, 7, 1)])
    with psycopg.connect(libpq_url(migrated_database_url)) as conn:
        for statement in (
            "UPDATE ledger_store.consumer_offsets SET next_offset = 1",
            "UPDATE ledger_store.consumer_offsets SET next_offset = 1, incarnation = 1",
            "UPDATE ledger_store.consumer_offsets SET incarnation = NULL",
            "DELETE FROM ledger_store.consumer_offsets",
            "UPDATE ledger_store.source_incarnations SET topic_id = 'x'",
        ):
            with pytest.raises(psycopg.errors.RaiseException), conn.transaction():
                conn.execute(statement)


def test_dead_letter_coordinates_are_stored_with_the_rejection(migrated_database_url: str) -> None:
    made = rejected("rejected:evidence-bundles/0/4", b"{not json", dlq_offset=4)
    payload = dict(made.entries[0].payload) | {
        "dlq": {"topic": "evidence-bundles.dlq"}
    }  # as the consumer writes it
    draft = dataclasses.replace(made, entries=[EntryDraft("submission.rejected", payload)])
    info = draft.operational
    assert info is not None
    placed = OperationalInfo(
        info.received_at,
        info.topic,
        info.partition,
        info.offset,
        info.host,
        DeadLetterCoordinates("dlq", 1, 17),
    )
    with LedgerStore(migrated_database_url, role="ledger_writer") as store:
        assert store.append(dataclasses.replace(draft, operational=placed)).status == "created"
        # re-delivered after a crash: the second dead-letter copy does not replace the first
        moved = dataclasses.replace(placed, dead_letter=DeadLetterCoordinates("dlq", 0, 99))
        assert store.append(dataclasses.replace(draft, operational=moved)).status == "existing"
    rows = query(migrated_database_url, "SELECT dlq_topic, dlq_partition, dlq_offset FROM ledger.rejections")
    assert rows == [("evidence-bundles.dlq", 1, 17)]


def test_0004_goes_up_down_and_up_on_a_ledger_holding_data_and_verify_passes(database_url: str) -> None:
    # A ledger as it stood before incarnations existed: written (today's append path needs the
    # append lock of 0005), then taken down to 0003, which drops every incarnation column and table.
    upgrade(database_url)
    drafts = corpus_drafts(limit=4)
    with LedgerStore(database_url) as store:
        store.append_batch(
            [*drafts[:2], rejected("rejected:evidence-bundles/0/1", b"nope", dlq_offset=1)],
            [OffsetAdvance(GROUP, TOPIC, 0, 0, 2)],
        )
    downgrade(database_url, "0003_translog")
    upgrade(database_url)
    assert current_revision(database_url) == head_revision()
    assert query(database_url, "SELECT next_offset, incarnation FROM ledger.consumer_offsets") == [(2, None)]
    assert query(database_url, "SELECT dlq_offset FROM ledger.rejections") == [(1,)]
    with LedgerStore(database_url) as store:
        legacy = store.resolve_source(GROUP, TOPIC, FIRST)
        assert (legacy.incarnation.reason, legacy.offsets) == ("legacy_offsets", {0: 0})  # reread, never skip
        store.append_batch(drafts[2:], [advance(0, 0, 3, 1)])
    code, report = ledger_json(database_url, "verify", "--no-translog")
    assert code == 0, report["problems"]

    downgrade(database_url, "0003_translog")
    assert query(database_url, "SELECT next_offset FROM ledger.consumer_offsets") == [(3,)]
    upgrade(database_url)
    assert not chain_problems(database_url)
    code, report = ledger_json(database_url, "verify", "--no-translog")
    assert code == 0, report
