"""The append path's shortcuts give exactly what the general definitions give (docs/event-store.md §3)."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.canonical import from_hex
from ledger.errors import InvalidDraftError
from ledger.store.append import prepare
from ledger.store.hashing import (
    GENESIS_PREV_HASH,
    canonical_text,
    chain_hashes,
    chain_links,
    entry_hash_reference,
    payload_hash,
    step_hash,
    submission_header,
    submission_id_for,
    submission_id_spliced,
    trace_step_text,
)
from ledger.store.payloads import trace_step_entry
from ledger.store.records import EntryDraft, StepDraft, StoredEntry, SubmissionDraft, new_stored_entry
from ledger.translog.leaves import entry_leaf_hash

STREAM = "0x" + "1" * 64
HASH = "0x" + "2" * 64


def _step_payload(**changes: Any) -> dict[str, Any]:
    return {"step_index": 3, "step_id": "step_0004", "step_type": "extract", "step_hash": HASH, **changes}


def test_trace_step_text_is_the_canonical_text_of_the_usual_shape() -> None:
    payload = _step_payload()
    text = trace_step_text(payload)
    assert text == canonical_text(payload)
    assert text == f'{{"step_hash":"{HASH}","step_id":"step_0004","step_index":3,"step_type":"extract"}}'


@pytest.mark.parametrize(
    "payload",
    [
        _step_payload(step_index=True),  # a bool is an int subclass, written true
        _step_payload(step_index=2**31),
        _step_payload(step_index=-1),
        _step_payload(step_index=1.0),
        _step_payload(step_id="sté"),  # non-ASCII
        _step_payload(step_id='a"b'),  # needs escaping
        _step_payload(step_type="a\\b"),
        _step_payload(step_type="tab\there"),
        _step_payload(step_type=None),
        _step_payload(extra=1),
        {key: value for key, value in _step_payload().items() if key != "step_type"},
    ],
)
def test_trace_step_text_leaves_every_other_shape_to_the_canonicaliser(payload: dict[str, Any]) -> None:
    assert trace_step_text(payload) is None


_TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x2FFF, exclude_categories=("Cs",)), max_size=12)


@given(
    index=st.one_of(st.integers(-5, 2**32), st.booleans()),
    step_id=_TEXT,
    step_type=_TEXT,
    digest=st.one_of(st.just(HASH), _TEXT),
)
@settings(max_examples=300, deadline=None)
def test_trace_step_text_never_differs_from_the_canonical_text(
    index: int, step_id: str, step_type: str, digest: str
) -> None:
    payload = _step_payload(step_index=index, step_id=step_id, step_type=step_type, step_hash=digest)
    text = trace_step_text(payload)
    assert text is None or text == canonical_text(payload)


@pytest.mark.parametrize("version", ["1.0.0", 'v"2\\ü\n', "é\u2028x", "abcé"])
def test_chain_links_are_the_entry_hash_definition_with_the_raw_digest(version: str) -> None:
    kinds = ["submission.received", "trace.step", "audit.completed"]
    links = [(kind, payload_hash(kind * (i + 1)), version) for i, kind in enumerate(kinds)]
    chain = chain_links(STREAM, links, start_seq=4, prev_hash=HASH)
    prev = HASH
    for (kind, digest, _), (seq, link_prev, current, raw) in zip(links, chain, strict=True):
        assert link_prev == prev
        assert current == entry_hash_reference(STREAM, seq, kind, digest, prev, version)
        assert raw == from_hex(current)
        prev = current
    assert [seq for seq, *_ in chain] == [4, 5, 6]
    assert chain_hashes(STREAM, links, start_seq=4, prev_hash=HASH) == [link[:3] for link in chain]


def _header(**changes: Any) -> dict[str, Any]:
    fields = {"idempotency_key": "k-1", "market_id": "m-1", "bundle_id": "b-1", "status": "audited"}
    return submission_header(input_hashes={"raw_sha256": HASH, "n": [1, "ü"]}, **{**fields, **changes})


@pytest.mark.parametrize(
    "changes",
    [{}, {"market_id": None}, {"bundle_id": None, "market_id": None}, {"idempotency_key": "a:b/c 1"}],
)
def test_the_spliced_submission_id_is_the_definition(changes: dict[str, Any]) -> None:
    header = _header(**changes)
    assert submission_id_spliced(header, canonical_text(header["input_hashes"])) == submission_id_for(header)


@pytest.mark.parametrize(
    "changes",
    [
        {"idempotency_key": "kü"},
        {"market_id": 'm"1'},
        {"bundle_id": "b\\1"},
        {"status": "a\nb"},
        {"market_id": 7},
    ],
)
def test_the_spliced_submission_id_leaves_other_values_to_the_canonicaliser(changes: dict[str, Any]) -> None:
    header = _header(**changes)
    assert submission_id_spliced(header, canonical_text(header["input_hashes"])) is None
    assert submission_id_spliced({**_header(), "extra": 1}, "{}") is None


@given(key=_TEXT, market=st.one_of(st.none(), _TEXT), bundle=st.one_of(st.none(), _TEXT))
@settings(max_examples=200, deadline=None)
def test_the_spliced_submission_id_never_differs(key: str, market: str | None, bundle: str | None) -> None:
    header = _header(idempotency_key=key, market_id=market, bundle_id=bundle)
    spliced = submission_id_spliced(header, canonical_text(header["input_hashes"]))
    assert spliced is None or spliced == submission_id_for(header)


def test_prepare_reports_bad_input_hashes_under_the_header() -> None:
    draft = dataclasses.replace(
        _draft([EntryDraft("audit.completed", {})], []), input_hashes={"x": float("nan")}
    )
    with pytest.raises(InvalidDraftError) as caught:
        prepare(draft)
    assert caught.value.field_path == "header.input_hashes.x"


def _stored(**changes: Any) -> StoredEntry:
    values: dict[str, Any] = {
        "global_seq": 9,
        "submission_id": STREAM,
        "stream_seq": 2,
        "kind": "trace.step",
        "payload_hash": HASH,
        "prev_hash": GENESIS_PREV_HASH,
        "entry_hash": "0x" + "3" * 64,
        "engine_version": "1.0.0",
        **changes,
    }
    return StoredEntry(**values)


def test_new_stored_entry_is_the_dataclass_instance() -> None:
    made = _stored()
    fast = new_stored_entry(*dataclasses.astuple(made))
    assert type(fast) is StoredEntry
    assert fast == made and hash(fast) == hash(made) and repr(fast) == repr(made)
    assert vars(fast) == vars(made)  # every field, no other attribute
    assert pickle.loads(pickle.dumps(fast)) == made
    assert copy.copy(fast) == made
    assert dataclasses.replace(fast, global_seq=10) == _stored(global_seq=10)
    assert fast != _stored(entry_hash="0x" + "4" * 64)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.global_seq = 1  # type: ignore[misc]


def _draft(entries: list[EntryDraft], steps: list[StepDraft]) -> SubmissionDraft:
    return SubmissionDraft(
        idempotency_key="k-1",
        market_id="m",
        bundle_id="b",
        input_hashes={"raw_sha256": HASH},
        status="audited",
        entries=entries,
        steps=steps,
        engine_version="1.0.0",
    )


def _step(index: int, step_id: str) -> StepDraft:
    body = canonical_text({"step_id": step_id, "i": index})
    return StepDraft(index, step_id, "map", ("ev_1",), step_hash(body), body)


def test_prepare_hashes_and_leaves_are_the_definitions() -> None:
    steps = [_step(0, "step_1"), _step(1, 'sté"p')]  # the second takes the canonicaliser
    entries = [
        EntryDraft("submission.received", {"x": [1, "ü"]}),
        *(trace_step_entry(step) for step in steps),
        EntryDraft("audit.completed", {"ok": True}),
    ]
    prepared = prepare(_draft(entries, steps))
    prev = GENESIS_PREV_HASH
    for seq, (entry, made) in enumerate(zip(entries, prepared.entries, strict=True), start=1):
        assert made.payload_canonical == canonical_text(entry.payload)
        assert made.payload_hash == payload_hash(made.payload_canonical)
        assert made.entry_hash == entry_hash_reference(
            prepared.submission_id, seq, entry.kind, made.payload_hash, prev, "1.0.0"
        )
        prev = made.entry_hash
    assert prepared.leaves == tuple(entry_leaf_hash(made.entry_hash) for made in prepared.entries)
    stored = prepared.stored_entries(41)
    assert [entry.global_seq for entry in stored] == [41, 42, 43, 44]
    assert stored[1] == StoredEntry(
        42, prepared.submission_id, 2, "trace.step", *prepared.entries[1][3:], "1.0.0"
    )


def test_a_trace_step_text_given_as_plain_str_is_still_checked() -> None:
    step = _step(0, "step_1")
    entry = trace_step_entry(step)
    wrong = EntryDraft("trace.step", entry.payload, canonical=canonical_text(entry.payload) + " ")
    with pytest.raises(InvalidDraftError, match="differs"):
        prepare(_draft([wrong], [step]))
    right = EntryDraft("trace.step", entry.payload, canonical=canonical_text(entry.payload))
    assert prepare(_draft([right], [step])).entries[0].payload_canonical == canonical_text(entry.payload)
