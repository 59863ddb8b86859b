"""The append path's promises on a real PostgreSQL (docs/event-store.md)."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json

import pytest

from ledger.errors import (
    IdempotencyConflictError,
    InvalidDraftError,
    LedgerUnavailableError,
    SchemaNotReadyError,
    StaleOffsetError,
)
from ledger.store.hashing import GENESIS_PREV_HASH
from ledger.store.ledger_store import LedgerStore
from ledger.store.payloads import rejection_payload, step_draft, trace_step_entry
from ledger.store.records import EntryDraft, OffsetAdvance, StepDraft, SubmissionDraft
from tests.helpers.database import chain_problems, query, row_counts, tamper
from tests.helpers.ledger_factories import audited, rejected

pytestmark = pytest.mark.integration


def test_append_assigns_gapless_global_seq_and_per_submission_chain(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    results = ledger_store.append_batch([audited("k1", steps=3), audited("k2", steps=2)])
    assert [r.status for r in results] == ["created", "created"]
    assert [e.global_seq for e in results[0].entries] == list(range(1, 7))
    assert [e.global_seq for e in results[1].entries] == list(range(7, 12))
    first = results[0].entries
    assert first[0].prev_hash == GENESIS_PREV_HASH
    assert all(later.prev_hash == earlier.entry_hash for earlier, later in itertools.pairwise(first))
    assert ledger_store.max_seq() == 11
    assert chain_problems(migrated_database_url) == []


def test_the_chain_check_reports_an_entry_removed_from_the_end_of_a_chain_as_a_gap(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    first, _ = ledger_store.append_batch([audited("k1", steps=1), audited("k2", steps=1)])
    tamper(
        migrated_database_url,
        "DELETE FROM ledger_store.entries WHERE global_seq = %(g)s",
        {"g": first.entries[-1].global_seq},
    )
    # both chains still link and hash; only the global sequence shows what is missing
    assert chain_problems(migrated_database_url) == ["global_seq is not gapless 1..7"]


def test_reappending_a_stored_submission_returns_it_and_writes_nothing(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    created = ledger_store.append(audited("k1"))
    before = row_counts(migrated_database_url)
    again = ledger_store.append_batch([audited("k1")])
    assert again[0].status == "existing" and again[0].ok
    assert again[0].entries == created.entries
    assert again[0].submission_id == created.submission_id
    assert row_counts(migrated_database_url) == before


def test_duplicate_inside_one_batch_is_written_once(ledger_store: LedgerStore) -> None:
    results = ledger_store.append_batch([audited("dup"), audited("other"), audited("dup")])
    assert [r.status for r in results] == ["created", "created", "existing"]
    assert results[2].entries == results[0].entries
    assert ledger_store.max_seq() == len(results[0].entries) + len(results[1].entries)


def test_conflicting_payload_under_a_stored_key_is_recorded_not_swallowed(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    stored = ledger_store.append(audited("k1", variant=0))
    results = ledger_store.append_batch([audited("k1", variant=1), audited("k2")])
    conflict, neighbour = results
    assert conflict.status == "conflict" and not conflict.ok
    assert conflict.entries == stored.entries  # the stored submission stands
    assert conflict.conflict is not None and conflict.conflict.reason == "input_hashes_differ"
    assert neighbour.status == "created"  # the rest of the batch is unaffected
    with pytest.raises(IdempotencyConflictError) as raised:
        conflict.raise_for_conflict()
    assert raised.value.idempotency_key == "k1" and raised.value.conflict_id == conflict.conflict.conflict_id
    rows = query(
        migrated_database_url,
        "SELECT idempotency_key, submission_id, reason, offered_submission_id FROM ledger.idempotency_conflicts",
    )
    assert rows == [
        ("k1", stored.submission_id, "input_hashes_differ", conflict.conflict.offered_submission_id)
    ]


def test_same_inputs_with_different_entries_is_an_entries_differ_conflict(ledger_store: LedgerStore) -> None:
    ledger_store.append(audited("k1", outcome="YES"))
    result = ledger_store.append(audited("k1", outcome="NO"))
    assert result.status == "conflict"
    assert result.conflict is not None and result.conflict.reason == "entries_differ"


def test_offsets_advance_in_the_same_transaction_and_only_forward(ledger_store: LedgerStore) -> None:
    ledger_store.append_batch([audited("k1")], [OffsetAdvance("g", "t", 0, 0, 1)])
    ledger_store.append_batch(
        [audited("k2")], [OffsetAdvance("g", "t", 0, 1, 2), OffsetAdvance("g", "t", 1, 0, 5)]
    )
    assert ledger_store.load_offsets("g", "t") == {0: 2, 1: 5}
    assert ledger_store.load_offsets("other", "t") == {}
    ledger_store.append_batch(
        [], [OffsetAdvance("g", "t", 0, 2, 9)]
    )  # offsets missing inside a batch (compaction)
    assert ledger_store.load_offsets("g", "t")[0] == 9


def test_an_offset_jump_past_the_stored_offset_is_refused(ledger_store: LedgerStore) -> None:
    """Compare-and-set: if the database lost acknowledged commits (async replica, restore), a batch
    starting beyond the stored offset would skip the lost records for good; it is refused instead."""
    ledger_store.append_batch([audited("k1")], [OffsetAdvance("g", "t", 0, 0, 3)])
    with pytest.raises(StaleOffsetError):
        ledger_store.append_batch([audited("k2")], [OffsetAdvance("g", "t", 0, 13, 23)])
    assert ledger_store.load_offsets("g", "t") == {0: 3}
    assert ledger_store.get_submission("k2") is None


def test_stale_offset_rolls_back_the_whole_batch(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    ledger_store.append_batch([audited("k1")], [OffsetAdvance("g", "t", 0, 0, 10)])
    before = row_counts(migrated_database_url)
    zombie_batch = [audited("zombie-1"), audited("zombie-2")]
    with pytest.raises(StaleOffsetError) as raised:
        ledger_store.append_batch(zombie_batch, [OffsetAdvance("g", "t", 0, 5, 12)])
    assert raised.value.partition == 0 and raised.value.code == "stale_offset"
    assert row_counts(migrated_database_url) == before
    assert ledger_store.get_submission("zombie-1") is None
    assert ledger_store.load_offsets("g", "t") == {0: 10}


def test_canonical_text_is_stored_and_hashed_not_the_jsonb(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    draft = audited("k1")
    result = ledger_store.append(draft)
    seq = result.entries[-2].global_seq  # audit.completed: evaluation_variables.numeric_value == 1.0
    text, payload_hash, jsonb_text = query(
        migrated_database_url,
        "SELECT payload_canonical, payload_hash, payload::text FROM ledger.entries WHERE global_seq = %s",
        (seq,),
    )[0]
    assert '"numeric_value":1.0' in text
    assert "0x" + hashlib.sha256(text.encode()).hexdigest() == payload_hash
    assert '"numeric_value": 1.0' in jsonb_text  # JSONB keeps it here, but key order and spacing differ
    assert jsonb_text != text
    entry = ledger_store.get_submission("k1")
    assert entry is not None
    assert isinstance(entry.entries[-2].payload["evaluation_variables"]["numeric_value"], float)


def test_get_submission_by_id_or_key_returns_entries_and_steps(ledger_store: LedgerStore) -> None:
    created = ledger_store.append(audited("k1", steps=4))
    by_key = ledger_store.get_submission("k1")
    by_id = ledger_store.get_submission(created.submission_id)
    assert by_key == by_id and by_key is not None
    assert [e.kind for e in by_key.entries] == [
        "submission.received",
        *["trace.step"] * 4,
        "audit.completed",
        "verdict.issued",
    ]
    assert [s.step_index for s in by_key.steps] == [0, 1, 2, 3]
    step_entries = [e for e in by_key.entries if e.kind == "trace.step"]
    assert [s.global_seq for s in by_key.steps] == [e.global_seq for e in step_entries]
    for step in by_key.steps:
        assert "0x" + hashlib.sha256(step.canonical_step.encode()).hexdigest() == step.step_hash
    assert by_key.operational.host == "test-host"
    assert ledger_store.get_submission("missing") is None


def test_evidence_ids_with_array_syntax_are_stored_exactly(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    # the COPY writes evidence_ids as a text[] literal built in prepare: quoting must be exact
    odd = ['ev "1"', "back\\slash", "a,b", "{c}", "NULL", "", " pad ", "tab\there", "new\nline", "é"]
    base = audited("k-odd", steps=2)
    steps = [
        step_draft(0, {"step_id": "step_0001", "type": "extract", "evidence_ids": odd}),
        step_draft(1, {"step_id": "step_0002", "type": "map", "evidence_ids": []}),
    ]
    entries = [base.entries[0], *(trace_step_entry(step) for step in steps), *base.entries[3:]]
    ledger_store.append(dataclasses.replace(base, entries=entries, steps=steps))
    rows = query(
        migrated_database_url,
        "SELECT evidence_ids FROM ledger_store.trace_steps ORDER BY step_index",
    )
    assert rows == [(odd,), ([],)]
    stored = ledger_store.get_submission("k-odd")
    assert stored is not None and [list(s.evidence_ids) for s in stored.steps] == [odd, []]
    bad = StepDraft(0, "step_0001", "extract", [1], steps[0].step_hash, steps[0].canonical_step)  # type: ignore[list-item]
    bad_entries = [base.entries[0], trace_step_entry(bad), *entries[2:]]
    with pytest.raises(InvalidDraftError, match="evidence ids must be strings"):
        ledger_store.append(
            dataclasses.replace(base, idempotency_key="k-bad", entries=bad_entries, steps=[bad, steps[1]])
        )


def test_iter_entries_pages_in_global_order(ledger_store: LedgerStore) -> None:
    ledger_store.append_batch([audited(f"k{i}", steps=2) for i in range(5)])
    seqs = [e.global_seq for e in ledger_store.iter_entries(page_size=3)]
    assert seqs == list(range(1, 26))
    assert [e.global_seq for e in ledger_store.iter_entries(after_seq=20)] == [21, 22, 23, 24, 25]
    assert [e.global_seq for e in ledger_store.iter_entries(after_seq=2, limit=4, page_size=3)] == [
        3,
        4,
        5,
        6,
    ]


def test_rejections_keep_raw_bytes_or_their_hash(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    small, big = b"{not json", b"x" * 70_000
    ledger_store.append_batch(
        [rejected("raw-small", small, dlq_offset=3), rejected("raw-big", big, dlq_offset=4)]
    )
    rows = query(
        migrated_database_url,
        "SELECT idempotency_key, reason_code, raw_size, raw_sha256, raw_base64 IS NOT NULL, dlq_topic, dlq_offset "
        "FROM ledger.rejections ORDER BY global_seq",
    )
    assert rows == [
        (
            "raw-small",
            "malformed_json",
            len(small),
            "0x" + hashlib.sha256(small).hexdigest(),
            True,
            "evidence-bundles.dlq",
            3,
        ),
        (
            "raw-big",
            "malformed_json",
            len(big),
            "0x" + hashlib.sha256(big).hexdigest(),
            False,
            "evidence-bundles.dlq",
            4,
        ),
    ]
    assert "raw_base64" not in rejection_payload(reason_code="x", message="m", raw=big)


def test_invalid_drafts_fail_before_anything_is_written(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    good = audited("good")
    bad_step = StepDraft(0, "step_0001", "map", ["ev_1"], "0x" + "0" * 64, '{"step_id":"step_0001"}')
    bad = SubmissionDraft(
        idempotency_key="bad",
        market_id="m",
        bundle_id="b",
        input_hashes={},
        status="audited",
        entries=[EntryDraft("trace.step", {"step_index": 0, "step_hash": bad_step.step_hash})],
        steps=[bad_step],
        engine_version="1.0.0",
    )
    with pytest.raises(InvalidDraftError, match="step_hash"):
        ledger_store.append_batch([good, bad])
    nan = SubmissionDraft(
        "nan",
        "m",
        "b",
        {},
        "audited",
        [EntryDraft("audit.completed", {"x": [float("nan")]})],
        engine_version="1.0.0",
    )
    with pytest.raises(InvalidDraftError) as raised:
        ledger_store.append_batch([nan])
    assert raised.value.field_path == "entries[0].payload.x[0]"
    assert row_counts(migrated_database_url)["entries"] == 0


def test_writer_role_can_append_conflicts_and_offsets(migrated_database_url: str) -> None:
    with LedgerStore(migrated_database_url, role="ledger_writer") as writer:
        writer.append_batch([audited("k1")], [OffsetAdvance("g", "t", 0, 0, 1)])
        result = writer.append_batch([audited("k1", variant=1)], [OffsetAdvance("g", "t", 0, 1, 2)])
        assert result[0].status == "conflict"
        assert writer.load_offsets("g", "t") == {0: 2}


def test_views_expose_audits_verdicts_steps_and_submissions(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    ledger_store.append_batch(
        [
            audited("a", market_id="m1", conflict=True),
            audited("b", market_id="m2", insufficient=True, outcome="NO"),
        ]
    )
    audits = query(
        migrated_database_url,
        "SELECT market_id, ok, conflict_detected, insufficient_evidence, reasoning_leaf_count "
        "FROM ledger.audit_results ORDER BY global_seq",
    )
    assert audits == [("m1", True, True, False, 3), ("m2", False, False, True, 3)]
    verdicts = query(migrated_database_url, "SELECT market_id, outcome, confidence FROM ledger.verdicts")
    assert [(m, o, float(c)) for m, o, c in verdicts] == [("m1", "YES", 0.75), ("m2", "NO", 0.75)]
    submissions = query(
        migrated_database_url,
        "SELECT idempotency_key, first_seq, last_seq, entry_count, step_count FROM ledger.submissions "
        "ORDER BY first_seq",
    )
    assert submissions == [("a", 1, 6, 6, 3), ("b", 7, 12, 6, 3)]
    steps = query(migrated_database_url, "SELECT step->>'step_id', step_type FROM ledger.trace_steps LIMIT 1")
    assert steps == [("step_0001", "extract")]
    stored = query(migrated_database_url, "SELECT input_hashes FROM ledger.submissions LIMIT 1")[0][0]
    assert set(stored) == {"prompt_spec_hash", "evidence_bundle_hash"}
    assert json.dumps(stored)  # JSONB comes back as a dict


def test_unmigrated_database_and_unreachable_server_use_the_error_vocabulary(database_url: str) -> None:
    with LedgerStore(database_url) as store, pytest.raises(SchemaNotReadyError):
        store.append(audited("k1"))
    with LedgerStore("postgresql://postgres@127.0.0.1:1/none") as store:
        with pytest.raises(LedgerUnavailableError) as raised:
            store.max_seq()
        assert raised.value.retryable
