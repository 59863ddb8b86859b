"""Replay's text check writes a rebuilt dict payload member by member (models by their field plan):
the bytes are the store's canonical text of the whole payload, and any change to a stored text is
still seen, in every member."""

from __future__ import annotations

from typing import Any

import pytest

from engine.schemas import PoRRoots
from ledger.replay.identical import _matches_rebuilt, _member_bytes
from ledger.store.hashing import canonical_text
from ledger.store.records import SubmissionDraft
from tests.helpers.replay import corpus_drafts


@pytest.fixture(scope="module")
def drafts() -> list[SubmissionDraft]:
    return corpus_drafts()


def _rebuilt_payloads(drafts: list[SubmissionDraft]) -> list[dict[str, Any]]:
    payloads = [entry.payload for draft in drafts for entry in draft.entries if entry.canonical is None]
    assert payloads and all(type(payload) is dict for payload in payloads)
    return payloads


def test_each_member_is_written_as_the_store_writes_it(drafts: list[SubmissionDraft]) -> None:
    models = 0
    for payload in _rebuilt_payloads(drafts):
        for value in payload.values():
            if value is not None:
                assert _member_bytes(value) == canonical_text(value).encode("utf-8")
                models += isinstance(value, PoRRoots)
    assert models > 0  # the models' own path is exercised


def test_a_payload_without_the_hashed_member_matches_its_canonical_text_and_nothing_else(
    drafts: list[SubmissionDraft],
) -> None:
    for payload in _rebuilt_payloads(drafts):
        stored = canonical_text(payload)
        assert _matches_rebuilt(stored, payload, object(), "0x00", b"")
        changed = [stored[:-1], stored + " ", "{}", stored[:-1] + ',"zz":1}', '{"a":1,' + stored[1:]]
        for key in payload:  # a change inside each member, and one member dropped
            member = f'"{key}":'
            at = stored.index(member) + len(member)
            changed.append(stored[:at] + ("1" if stored[at] != "1" else "2") + stored[at + 1 :])
        for text in changed:
            assert text != stored
            assert not _matches_rebuilt(text, payload, object(), "0x00", b"")


def test_a_payload_with_null_or_non_ascii_keys_is_written_whole() -> None:
    payload = {"b": None, "a": [1, None], "é": "x"}
    assert _matches_rebuilt(canonical_text(payload), payload, object(), "0x00", b"")
    assert not _matches_rebuilt('{"a":[1,null],"b":null,"é":"x"}', payload, object(), "0x00", b"")
    assert _matches_rebuilt("{}", {}, object(), "0x00", b"")
