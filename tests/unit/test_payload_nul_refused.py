"""An entry payload holding U+0000 is refused by ``prepare``, before anything is written.

Canonical JSON writes U+0000 as the escape ``\\u0000``, which ``text`` holds but ``jsonb`` cannot:
``ledger.entries.payload`` parses the stored text on read (revision 0009), so one such row made
every reader's query reaching it fail ("unsupported Unicode escape sequence"). The consumer's
decoder refuses U+0000 already; the store refuses it for every other draft (follow-up entries,
the store's API), whether the canonical text was computed by the store or handed to it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ledger.errors import InvalidDraftError
from ledger.store.append import prepare
from ledger.store.follow_ups import prepare_follow_ups
from ledger.store.hashing import canonical_payload
from ledger.store.records import EntryDraft
from tests.helpers.ledger_factories import audited

DRAFT = audited("payload-nul", steps=2)
_LAST = len(DRAFT.entries) - 1


def _with_payload(payload: dict[str, Any], *, trusted: bool) -> Any:
    last = DRAFT.entries[_LAST]
    entry = EntryDraft(last.kind, payload, canonical_payload(payload) if trusted else None)
    return dataclasses.replace(DRAFT, entries=(*DRAFT.entries[:_LAST], entry))


@pytest.mark.parametrize("trusted", [False, True])
@pytest.mark.parametrize(
    "payload", [{"note": "a\x00b"}, {"n\x00": 1}, {"deep": [{"x": ["\x00"]}]}, {"note": "\\\x00"}]
)
def test_a_payload_holding_nul_is_refused(payload: dict[str, Any], trusted: bool) -> None:
    base = dict(DRAFT.entries[_LAST].payload)
    with pytest.raises(InvalidDraftError) as caught:
        prepare(_with_payload({**base, **payload}, trusted=trusted))
    assert caught.value.field_path == f"entries[{_LAST}].payload"


@pytest.mark.parametrize("trusted", [False, True])
@pytest.mark.parametrize("payload", [{"note": "\\u0000"}, {"\\u0000": "x"}, {"note": "u0000"}])
def test_a_backslash_and_u0000_spelled_out_are_kept(payload: dict[str, Any], trusted: bool) -> None:
    base = dict(DRAFT.entries[_LAST].payload)
    prepared = prepare(_with_payload({**base, **payload}, trusted=trusted))
    assert len(prepared.entries) == len(DRAFT.entries)


def test_a_follow_up_holding_nul_is_refused() -> None:
    with pytest.raises(InvalidDraftError) as caught:
        prepare_follow_ups([EntryDraft("reasoning.verified", {"answer": "x\x00"})])
    assert caught.value.field_path == "entries[0].payload"
