"""Hostile header values of a draft: refused before the lock (InvalidDraftError, in both builds) or,
if stored, stored so that ``ledger verify`` recomputes the same submission id. Never a batch-wide
database error for one bad draft's value, never a stored row verify cannot prove.

Before the fix: a number as market_id/bundle_id was stored as text but hashed as a JSON number
(verify failed on the ledger), a NUL in the key, ids or input_hashes failed the whole batch inside
the lock (LedgerDataError), and a non-str engine_version was a TypeError compiled but an
InvalidDraftError pure."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from ledger.errors import InvalidDraftError
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import EntryDraft
from tests.helpers.database import query
from tests.helpers.ledger_factories import rejected
from tests.helpers.replay import corpus_drafts, ledger_json

pytestmark = pytest.mark.integration


class _Text(str):
    def __str__(self) -> str:
        return "other"


_REFUSED = [
    {"market_id": 5},
    {"market_id": True},
    {"bundle_id": 2**70},
    {"market_id": 1.5},
    {"engine_version": 7},
    {"engine_version": 10**400},
    {"engine_version": ["1.0.0"]},
    {"idempotency_key": "k\x00"},
    {"market_id": "m\x00"},
    {"bundle_id": "b\x00"},
    {"engine_version": "1\x00"},
    {"input_hashes": {"raw_sha256": "\x00"}},
    {"input_hashes": {"raw_sha256": ["a", {"\x00": 1}]}},
    {"bundle_id": "\ud800"},
]
_STORED = [
    {"market_id": _Text("m")},
    {"bundle_id": "1e400"},
    {"input_hashes": {"raw_sha256": "\\u0000"}},  # a backslash then u0000: no NUL
    {"market_id": "m\u2028\x01"},
]


@pytest.mark.parametrize("change", _REFUSED, ids=repr)
def test_a_hostile_header_value_is_refused_before_the_lock(
    ledger_store: LedgerStore, migrated_database_url: str, change: dict[str, Any]
) -> None:
    good = rejected("good", b"good")
    with pytest.raises(InvalidDraftError):
        ledger_store.append_batch([good, replace(rejected("bad", b"bad"), **change)])
    assert query(migrated_database_url, "SELECT count(*) FROM ledger_store.entries") == [(0,)]


@pytest.mark.parametrize("change", _STORED, ids=repr)
def test_an_odd_but_storable_header_value_verifies(
    ledger_store: LedgerStore, migrated_database_url: str, change: dict[str, Any]
) -> None:
    results = ledger_store.append_batch(
        [rejected("good", b"good"), replace(rejected("bad", b"bad"), **change)]
    )
    assert [r.status for r in results] == ["created", "created"]
    code, report = ledger_json(migrated_database_url, "verify")
    assert code == 0, report


class _Any(str):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


@pytest.mark.parametrize(
    "change",
    [{"step_index": False}, {"step_index": 0.0}, {"step_hash": _Any("0x" + "0" * 64)}],
    ids=repr,
)
def test_a_step_payload_that_only_compares_equal_to_its_row_is_refused(
    ledger_store: LedgerStore, migrated_database_url: str, change: dict[str, Any]
) -> None:
    """A trace.step payload whose step_index was False (or 0.0) for the row's 0 was stored, and verify
    passed on it, though the committed payload disagreed with the step column."""
    draft = corpus_drafts(1, limit=1)[0]
    position = next(i for i, entry in enumerate(draft.entries) if entry.kind == "trace.step")
    assert draft.steps[0].step_index == 0
    entries = list(draft.entries)
    entries[position] = EntryDraft("trace.step", {**entries[position].payload, **change})
    with pytest.raises(InvalidDraftError, match="step_index and step_hash"):
        ledger_store.append_batch([replace(draft, entries=entries)])
    assert query(migrated_database_url, "SELECT count(*) FROM ledger_store.entries") == [(0,)]
