"""A precomputed payload text is trusted only as a CanonicalText still attached to its payload."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest

import ledger.store.append as append_module
from engine.canonical import canonical_bytes
from ledger.errors import InvalidDraftError
from ledger.store.append import prepare
from ledger.store.follow_ups import prepare_follow_ups
from ledger.store.hashing import CanonicalText, canonical_payload, canonical_text
from ledger.store.records import EntryDraft, SubmissionDraft
from tests.helpers.consumer_drafts import consumer_drafts


def _canonicalised_in_prepare(monkeypatch: pytest.MonkeyPatch, draft: SubmissionDraft) -> list[str]:
    """The ``where`` of every value ``prepare`` canonicalises itself for ``draft``."""
    seen: list[str] = []
    exact = append_module._canonical

    def recording(value: Any, where: str) -> str:
        seen.append(where)
        return exact(value, where)

    monkeypatch.setattr(append_module, "_canonical", recording)
    prepare(draft)
    return seen


def _with_received(draft: SubmissionDraft, entry: EntryDraft) -> SubmissionDraft:
    return dataclasses.replace(draft, entries=[entry, *draft.entries[1:]])


def test_consumer_received_text_is_trusted_and_equals_the_canonical_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for draft in consumer_drafts():
        received = draft.entries[0]
        assert type(received.canonical) is CanonicalText
        assert received.canonical.made_from(received.payload)
        assert received.canonical == canonical_bytes(received.payload).decode("utf-8")
        seen = _canonicalised_in_prepare(monkeypatch, draft)
        assert "entries[0].payload" not in seen  # the trusted path: not canonicalised again
        assert "input_hashes" in seen  # the recorder does see what prepare canonicalises
        monkeypatch.undo()


def test_every_stored_text_equals_the_canonical_bytes_of_its_payload() -> None:
    for draft in consumer_drafts():
        prepared = prepare(draft)
        for entry, stored in zip(draft.entries, prepared.entries, strict=True):
            assert stored.payload_canonical == canonical_bytes(entry.payload).decode("utf-8")
            assert type(stored.payload_canonical) is str  # stored without the payload reference


def test_a_plain_string_with_the_same_characters_takes_the_exact_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    draft = consumer_drafts()[0]
    received = draft.entries[0]
    same = EntryDraft(received.kind, received.payload, canonical=str(received.canonical))
    seen = _canonicalised_in_prepare(monkeypatch, _with_received(draft, same))
    assert "entries[0].payload" in seen


def test_a_canonical_text_cannot_be_made_or_changed_outside_canonical_payload() -> None:
    text = canonical_payload({"a": 1})
    assert text == '{"a":1}'
    with pytest.raises(TypeError, match="canonical_payload"):
        CanonicalText('{"a":2}', {"a": 2}, object())
    with pytest.raises(AttributeError):
        text._payload = {"a": 2}
    with pytest.raises(TypeError):
        pickle.dumps(text)


def test_a_text_moved_to_another_payload_is_refused() -> None:
    draft = consumer_drafts()[0]
    received = draft.entries[0]
    other = {**received.payload, "prompt_spec_hash": "0x" + "ff" * 32}
    moved = dataclasses.replace(received, payload=other)
    assert moved.canonical is received.canonical
    with pytest.raises(InvalidDraftError, match="precomputed canonical text differs") as caught:
        prepare(_with_received(draft, moved))
    assert caught.value.field_path == "entries[0].payload"


def test_a_text_moved_to_an_equal_payload_is_checked_and_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    draft = consumer_drafts()[0]
    received = draft.entries[0]
    moved = dataclasses.replace(received, payload=dict(received.payload))
    seen = _canonicalised_in_prepare(monkeypatch, _with_received(draft, moved))
    assert "entries[0].payload" in seen
    assert prepare(_with_received(draft, moved)).entries == prepare(draft).entries


@pytest.mark.parametrize(
    "change",
    [
        lambda payload: payload.__setitem__("prompt_spec_hash", "0x" + "ee" * 32),
        lambda payload: payload.__setitem__("zzz", 1),
        lambda payload: payload.pop("inputs_hash"),
    ],
    ids=["member_reassigned", "member_added", "member_removed"],
)
def test_a_payload_changed_after_its_text_was_made_is_refused(change: Any) -> None:
    draft = consumer_drafts()[0]
    received = draft.entries[0]
    change(received.payload)
    assert isinstance(received.canonical, CanonicalText)
    assert not received.canonical.made_from(received.payload)
    with pytest.raises(InvalidDraftError, match="precomputed canonical text differs"):
        prepare(draft)


def test_a_member_set_to_none_after_the_text_was_made_is_still_noticed() -> None:
    payload: dict[str, Any] = {"a": 1, "b": 2}
    text = canonical_payload(payload)
    assert text is not None and text.made_from(payload)
    payload["b"] = None  # the canonical text drops None members: the stored text would differ
    assert not text.made_from(payload)


def test_carried_members_are_spliced_in_canonical_key_order() -> None:
    payload = {"z": 1, "b": {"y": 2, "x": None}, "a": "spliced", "n": None}
    text = canonical_payload(payload, {"a": b'"spliced"'})
    assert text == canonical_text(payload) == '{"a":"spliced","b":{"y":2},"z":1}'


def test_a_payload_with_no_canonical_form_gets_no_text_and_prepare_names_the_path() -> None:
    payload = {"bad": float("nan")}
    assert canonical_payload(payload) is None
    assert canonical_payload(payload, {"other": b"1"}) is None
    with pytest.raises(InvalidDraftError) as caught:
        prepare_follow_ups([EntryDraft("reasoning.verified", payload)])
    assert caught.value.field_path == "entries[0].payload.bad"


def test_follow_ups_refuse_a_given_text_that_differs() -> None:
    payload = {"status": "ok", "attempt": 1}
    assert prepare_follow_ups(
        [EntryDraft("reasoning.verified", payload, canonical=canonical_payload(payload))]
    )[0][1] == canonical_text(payload)
    with pytest.raises(InvalidDraftError, match="precomputed canonical text differs"):
        prepare_follow_ups(
            [EntryDraft("reasoning.verified", payload, canonical='{"attempt":2,"status":"ok"}')]
        )


_ODD_STRINGS = [chr(code) for code in range(128)] + [
    "",
    "0x" + "ab" * 32,
    'a"b',
    "a\\b",
    "é",
    "\u2028",
    "😀",
    "x\x7f",
]


@pytest.mark.parametrize("value", _ODD_STRINGS)
def test_a_spliced_string_member_is_written_as_canonical_text_writes_it(value: str) -> None:
    payload: dict[str, Any] = {"carried": "c", "value": value, "int": 1, "none": None}
    text = canonical_payload(payload, {"carried": b'"c"'})
    assert text is not None
    assert text == canonical_text(payload)


@pytest.mark.parametrize("key", ['a"b', "a\\b", "tab\t", "é", "\x00", "\x7f", ""])
def test_a_key_needing_escaping_or_not_ascii_takes_the_whole_canonicalisation(key: str) -> None:
    payload: dict[str, Any] = {"carried": "c", key: "v", "z": {"q": True}}
    text = canonical_payload(payload, {"carried": b'"c"'})
    assert text is not None
    assert text == canonical_text(payload)


class _Key(str):
    """A string key of another type: the splice leaves such a payload to the whole canonicalisation."""


def test_a_key_of_another_type_takes_the_whole_canonicalisation() -> None:
    payload: dict[Any, Any] = {"carried": "c", _Key("k"): "v"}
    whole = canonical_payload(dict(payload))
    assert canonical_payload(payload, {"carried": b'"c"'}) == whole
    assert canonical_payload({"carried": "c", 1: "v"}, {"carried": b'"c"'}) == canonical_payload(
        {"carried": "c", 1: "v"}
    )
