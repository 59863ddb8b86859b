"""Round 16's append (chain_entries, fold_leaves, results made after the commit) under attack.

The stored tree must equal a from-scratch rebuild at tile edges (255/256/257 leaves, and
65,535/65,536 through ``extend_tree``), after an empty batch, a batch of only existing or conflicting
drafts, and a rollback mid-batch followed by a retry; ``ledger verify`` and ``verify-log`` must pass.
The results ``append_batch`` returns must be what was committed; an exception after the commit
(while the results are made) leaves the data committed and a retry harmless (``existing``, no
duplicate; the same offsets again are stale, nothing written).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, text

import ledger.store.append as append_module
import ledger.store.ledger_store as store_module
from engine.merkle.rfc6962 import root_from_leaf_hashes
from ledger.connect import create_ledger_engine, libpq_url
from ledger.errors import StaleOffsetError
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import DeadLetterCoordinates, OffsetAdvance, SubmissionDraft
from ledger.translog.checkpoints import create_checkpoint
from ledger.translog.keys import generate_key_files, load_private_key
from ledger.translog.leaves import entry_leaf_hash
from ledger.translog.tree import catch_up_tree, extend_tree, root_at, tree_size
from tests.helpers.database import chain_problems, query
from tests.helpers.ledger_factories import audited, rejected
from tests.helpers.replay import corpus_drafts, ledger

pytestmark = pytest.mark.integration


def _tiles(url: str) -> list[tuple[Any, ...]]:
    return query(url, "SELECT level, idx, width, hashes FROM ledger_store.merkle_tiles ORDER BY level, idx")


def _stored_leaves(url: str) -> list[bytes]:
    rows = query(url, "SELECT entry_hash FROM ledger_store.entries ORDER BY global_seq")
    return [entry_leaf_hash(entry_hash) for (entry_hash,) in rows]


def _assert_tree_is_a_rebuild(url: str) -> None:
    """The incrementally kept tiles equal the tiles a from-scratch catch-up makes; the root the reference's."""
    kept = _tiles(url)
    with psycopg.connect(libpq_url(url)) as conn, conn.transaction(), conn.cursor() as cur:
        cur.execute("SET LOCAL session_replication_role = replica")
        cur.execute("DELETE FROM ledger_store.merkle_tiles")
    engine = create_ledger_engine(url)
    try:
        with engine.begin() as connection:
            catch_up_tree(connection)
        with engine.connect() as connection:
            leaves = _stored_leaves(url)
            assert tree_size(connection) == len(leaves)
            assert root_at(connection, len(leaves)) == root_from_leaf_hashes(leaves)
    finally:
        engine.dispose()
    assert _tiles(url) == kept
    assert chain_problems(url) == []


def _verify_with_the_log(url: str, tmp_path: Path) -> None:
    generate_key_files(tmp_path / "log.key")
    engine = create_ledger_engine(url)
    try:
        create_checkpoint(engine, load_private_key(tmp_path / "log.key"))
    finally:
        engine.dispose()
    for command in ("verify", "verify-log"):
        done = ledger(url, command)
        assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])


def _entries_in_db(url: str, submission_id: str) -> list[tuple[Any, ...]]:
    return query(
        url,
        "SELECT global_seq, submission_id, stream_seq, kind, payload_hash, prev_hash, entry_hash, "
        "engine_version FROM ledger_store.entries WHERE submission_id = %(s)s ORDER BY stream_seq",
        {"s": submission_id},
    )


def _as_rows(entries: Any) -> list[tuple[Any, ...]]:
    return [
        (e.global_seq, e.submission_id, e.stream_seq, e.kind, e.payload_hash, e.prev_hash, e.entry_hash,
         e.engine_version)
        for e in entries
    ]  # fmt: skip


def _batches(targets: list[int]) -> list[list[SubmissionDraft]]:
    """Batches of corpus drafts, padded with one-entry rejected drafts, whose running totals of
    entries are exactly ``targets``."""
    corpus = iter(corpus_drafts(2))
    batches: list[list[SubmissionDraft]] = []
    total = 0
    for number, target in enumerate(targets):
        batch: list[SubmissionDraft] = []
        while True:
            draft = next(corpus)
            if total + len(draft.entries) > target - 1:
                break
            batch.append(draft)
            total += len(draft.entries)
        while total < target:
            batch.append(rejected(f"pad{number}-{total}", f"raw {total}".encode(), dlq_offset=total))
            total += 1
        batches.append(batch)
    return batches


@pytest.mark.parametrize(
    "targets",
    [[255, 256, 257, 511, 512, 513], [254, 257, 512], [256, 510, 513]],
    ids=["by1", "across", "whole"],
)
def test_tile_edges_empty_and_all_existing_batches_keep_the_tree_a_rebuild(
    ledger_store: LedgerStore, migrated_database_url: str, tmp_path: Path, targets: list[int]
) -> None:
    url = migrated_database_url
    for drafts, total in zip(_batches(targets), targets, strict=True):
        results = ledger_store.append_batch(drafts)
        assert [r.status for r in results] == ["created"] * len(drafts)
        assert _count(url) == total
        for result in results:
            assert _as_rows(result.entries) == _entries_in_db(url, result.submission_id)
        _assert_tree_is_a_rebuild(url)
        assert ledger_store.append_batch([]) == []
        again = ledger_store.append_batch(drafts)  # every draft already stored
        assert {r.status for r in again} == {"existing"}
        assert [r.entries for r in again] == [r.entries for r in results]
        # every draft a conflict: the same keys with other raw bytes
        clashing = [
            rejected(d.idempotency_key, b"other", dlq_offset=9) for d in drafts if d.status == "rejected"
        ]
        if clashing:
            conflicted = ledger_store.append_batch(clashing)
            assert {r.status for r in conflicted} == {"conflict"}
        assert _count(url) == total
        _assert_tree_is_a_rebuild(url)
    _verify_with_the_log(url, tmp_path)


def _count(url: str) -> int:
    (count,) = query(url, "SELECT count(*) FROM ledger_store.entries")[0]
    return int(count)


def test_a_rollback_after_the_tree_was_extended_then_a_retry(
    ledger_store: LedgerStore, migrated_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = migrated_database_url
    ledger_store.append_batch([audited(f"r{i}", steps=i % 3 + 1) for i in range(20)])
    before = _tiles(url)

    def boom(*args: Any) -> None:
        raise RuntimeError("after the entries and the tree, before the offsets")

    monkeypatch.setattr(append_module, "_advance_offsets", boom)
    batch = [
        audited("r5", steps=3),
        audited("n1", steps=2),
        audited("n2", steps=250),
        audited("r3", variant=1),
    ]
    with pytest.raises(RuntimeError):
        ledger_store.append_batch(batch)
    assert _tiles(url) == before
    assert query(url, "SELECT count(*) FROM ledger_store.idempotency_conflicts") == [(0,)]
    monkeypatch.undo()
    results = ledger_store.append_batch(batch)
    assert [r.status for r in results] == ["existing", "created", "created", "conflict"]
    for result in results:
        assert _as_rows(result.entries) == _entries_in_db(url, result.submission_id)
    _assert_tree_is_a_rebuild(url)


def test_an_exception_while_the_results_are_made_after_the_commit(
    ledger_store: LedgerStore, migrated_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = migrated_database_url
    offsets = [OffsetAdvance("g", "t", 0, 0, 3)]
    batch = [audited("x1", steps=1), audited("x2", steps=2), audited("x1", steps=1)]

    def boom(outcomes: Any) -> Any:
        raise MemoryError("while making the results")

    monkeypatch.setattr(store_module, "outcome_results", boom)
    with pytest.raises(MemoryError):
        ledger_store.append_batch(batch, offsets)
    monkeypatch.undo()
    # committed: the entries, the tree and the offset
    assert _count(url) == 4 + 5
    assert query(url, "SELECT next_offset FROM ledger_store.consumer_offsets") == [(3,)]
    # a consumer that retries the same batch with the same offsets is told it is stale, nothing written
    with pytest.raises(StaleOffsetError):
        ledger_store.append_batch(batch, offsets)
    # without the offsets (or from the stored offset) the retry is harmless: existing, no duplicate
    again = ledger_store.append_batch(batch)
    assert [r.status for r in again] == ["existing"] * 3
    assert again[0].entries == again[2].entries
    for result in again:
        assert _as_rows(result.entries) == _entries_in_db(url, result.submission_id)
    assert _count(url) == 9
    _assert_tree_is_a_rebuild(url)


def test_a_key_repeated_in_one_batch_gets_the_first_offers_entries(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    url = migrated_database_url
    results = ledger_store.append_batch(
        [audited("d1", steps=1), audited("d1", steps=1), audited("d1", variant=2), audited("d2")]
    )
    assert [r.status for r in results] == ["created", "existing", "conflict", "created"]
    assert results[0].entries == results[1].entries == results[2].entries
    assert results[2].conflict is not None
    for result in results:
        assert _as_rows(result.entries) == _entries_in_db(url, result.submission_id)
    # the results are made once: the created and the repeated one are the very same tuple
    assert results[0].entries is results[1].entries
    _assert_tree_is_a_rebuild(url)


@pytest.mark.parametrize("first", [65_535, 65_536])
def test_extend_tree_across_a_level_two_edge(engine: Engine, first: int) -> None:
    leaves = [hashlib.sha256(i.to_bytes(4, "big")).digest() for i in range(65_536 + 258)]
    with engine.begin() as connection:
        extend_tree(connection, leaves[:first], 0)
    size = first
    for count in (1, 255, 1, 258 - (first - 65_535)):
        if size + count > len(leaves):
            count = len(leaves) - size
        with engine.begin() as connection:
            frontier = extend_tree(connection, leaves[size : size + count], size)
        size += count
        assert frontier.root() == root_from_leaf_hashes(leaves[:size])
    with engine.connect() as connection:
        rows = connection.execute(
            text("SELECT level, idx, width, hashes FROM ledger_store.merkle_tiles WHERE level = 2")
        ).all()
        assert rows == [(2, 0, 1, root_from_leaf_hashes(leaves[:65_536]))]
        for probe in (65_535, 65_536, 65_537, 65_536 + 256, size):
            assert root_at(connection, probe) == root_from_leaf_hashes(leaves[:probe])


def test_a_created_rejections_dead_letter_is_recorded_when_a_later_draft_of_the_batch_conflicts(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    """``record_dead_letters`` looked each draft's outcome up by key, the last outcome of a key
    winning: a created rejection followed in its batch by a conflicting draft of the same key lost
    its dead-letter coordinates. Each draft goes with its own outcome."""
    first = rejected("r", b"first")
    second = rejected("r", b"second")

    def lettered(draft: SubmissionDraft, offset: int) -> SubmissionDraft:
        assert draft.operational is not None
        letter = DeadLetterCoordinates("evidence-bundles.dlq", 0, offset)
        return replace(draft, operational=replace(draft.operational, dead_letter=letter))

    results = ledger_store.append_batch([lettered(first, 7), lettered(second, 8)])
    assert [r.status for r in results] == ["created", "conflict"]
    assert query(
        migrated_database_url,
        "SELECT submission_id, dlq_topic, dlq_partition, dlq_offset FROM ledger_store.dead_letters",
    ) == [(results[0].submission_id, "evidence-bundles.dlq", 0, 7)]
