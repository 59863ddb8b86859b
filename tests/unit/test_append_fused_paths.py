"""The append's fused per-entry passes give exactly what the step-by-step definitions give.

``chain_entries`` (payload hashes, chain links and Merkle leaves of a new submission in one pass)
is pinned to ``payload_hash``, ``entry_hash_reference`` (the general canonicaliser) and ``leaf_hash``,
on hostile values too: NUL, lone surrogates, str subclasses, float-looking strings; a kind that is
no string is refused by ``prepare``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.canonical import from_hex
from engine.merkle.rfc6962 import leaf_hash
from ledger.errors import InvalidDraftError
from ledger.store.append import PreparedEntry, prepare
from ledger.store.hashing import (
    GENESIS_PREV_HASH,
    chain_entries,
    entry_hash_reference,
    payload_hash,
    step_hash,
)
from ledger.store.payloads import trace_step_entry
from ledger.store.records import EntryDraft, StepDraft, SubmissionDraft

STREAM = "0x" + "1" * 64


class _Str(str):
    """A str subclass that prints and compares otherwise than its characters."""

    def __str__(self) -> str:
        return "other"

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


def _reference(stream: str, version: str, kinds: list[str], texts: list[str]) -> Any:
    """The definitions one by one: payload_hash, entry_hash through the general canonicaliser, leaf_hash."""
    rows, leaves, prev = [], [], GENESIS_PREV_HASH
    for seq, (kind, text) in enumerate(zip(kinds, texts, strict=True), start=1):
        digest = payload_hash(text)
        current = entry_hash_reference(stream, seq, kind, digest, prev, version)
        rows.append((seq, kind, text, digest, prev, current))
        leaves.append(leaf_hash(from_hex(current)))
        prev = current
    return rows, leaves


def _outcome(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:  # refused either way (the error types differ: an encoding or a canonical error)
        return "refused"


_HOSTILE = st.one_of(
    st.text(st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF), max_size=40),
    st.sampled_from(["trace.step", "a\x00b", "\ud800", "1e400", "-0", "0x" + "f" * 64, 'q"\\', "é\u2028"]),
)
_STRINGS = st.one_of(_HOSTILE, _HOSTILE.map(_Str))


@settings(max_examples=300, deadline=None)
@given(
    version=_STRINGS,
    pairs=st.lists(st.tuples(_STRINGS, _HOSTILE), max_size=6),
    stream=st.one_of(st.just(STREAM), _HOSTILE),
)
def test_chain_entries_is_the_definitions(version: str, pairs: list[tuple[str, str]], stream: str) -> None:
    kinds = [kind for kind, _ in pairs]
    texts = [text for _, text in pairs]
    assert _outcome(chain_entries, stream, version, kinds, texts) == _outcome(
        _reference, stream, version, kinds, texts
    )


@pytest.mark.parametrize("kind", [None, 7, 2**80, True, b"trace.step"])
def test_a_kind_that_is_no_string_is_refused(kind: Any) -> None:
    with pytest.raises((InvalidDraftError, TypeError)):
        prepare(_draft([EntryDraft(kind, {"x": 1})], []))


def test_chain_entries_starts_at_the_genesis_and_refuses_unequal_lists() -> None:
    rows, leaves = chain_entries(STREAM, "1.0.0", ["a", "b"], ["{}", "[]"])
    assert rows[0][4] == GENESIS_PREV_HASH and rows[1][4] == rows[0][5]
    assert [row[0] for row in rows] == [1, 2] and len(leaves) == 2
    with pytest.raises(ValueError):
        chain_entries(STREAM, "1.0.0", ["a"], [])


def _draft(entries: list[EntryDraft], steps: list[StepDraft]) -> SubmissionDraft:
    return SubmissionDraft(
        idempotency_key="k",
        market_id="m",
        bundle_id="b",
        input_hashes={"raw_sha256": "0x00"},
        status="audited",
        entries=entries,
        steps=steps,
        engine_version="1.0.0",
    )


def test_prepare_makes_named_prepared_entries() -> None:
    body = '{"i":0}'
    step = StepDraft(0, "step_1", "map", ("ev_1",), step_hash(body), body)
    entries = [EntryDraft("submission.received", {"x": 1}), trace_step_entry(step)]
    prepared = prepare(_draft(entries, [step]))
    for made in prepared.entries:
        assert type(made) is PreparedEntry
        assert made == PreparedEntry(*made) and made._fields == PreparedEntry._fields
    texts = [made.payload_canonical for made in prepared.entries]
    rows, leaves = _reference(prepared.submission_id, "1.0.0", [e.kind for e in entries], texts)
    assert list(prepared.entries) == rows and list(prepared.leaves) == leaves
