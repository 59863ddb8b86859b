"""The consumer reuses the engine's canonical bytes; the store refuses a precomputed text that differs."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ledger.errors import InvalidDraftError
from ledger.store.append import prepare
from ledger.store.hashing import canonical_text
from ledger.store.payloads import step_draft
from ledger.store.records import EntryDraft, SubmissionDraft
from tests.helpers.consumer_drafts import consumer_drafts


def _without_precomputed(draft: SubmissionDraft) -> SubmissionDraft:
    entries = [EntryDraft(entry.kind, entry.payload) for entry in draft.entries]
    steps = []
    for step in draft.steps:
        steps.append(step_draft(step.step_index, json.loads(step.canonical_step)))
    return dataclasses.replace(draft, entries=entries, steps=steps)


def _with_received_canonical(draft: SubmissionDraft, text: str) -> SubmissionDraft:
    received = draft.entries[0]
    entries = [EntryDraft(received.kind, received.payload, canonical=text), *draft.entries[1:]]
    return dataclasses.replace(draft, entries=entries)


def test_consumer_drafts_store_the_same_bytes_as_recomputed_drafts() -> None:
    for draft in consumer_drafts():
        received = draft.entries[0]
        assert received.canonical is not None
        assert received.canonical == canonical_text(received.payload)
        fast, slow = prepare(draft), prepare(_without_precomputed(draft))
        assert fast.entries == slow.entries
        assert fast.step_rows == slow.step_rows
        assert fast.submission_id == slow.submission_id


@pytest.mark.parametrize(
    "tamper",
    [
        lambda text: text.replace('"prompt_spec_hash":"0x', '"prompt_spec_hash":"0xff', 1),
        lambda text: text[:-1] + ',"zzz":1}',
        lambda text: text.replace(",", ", ", 1),
        lambda text: "[" + text + "]",
        lambda text: text[:-1],
    ],
    ids=["scalar_differs", "extra_key", "not_canonical_form", "not_an_object", "not_json"],
)
def test_a_precomputed_text_that_differs_from_the_payload_is_refused(tamper: object) -> None:
    draft = consumer_drafts()[0]
    text = draft.entries[0].canonical
    assert text is not None
    tampered = tamper(text)  # type: ignore[operator]
    with pytest.raises(InvalidDraftError, match="precomputed canonical text differs") as caught:
        prepare(_with_received_canonical(draft, tampered))
    assert caught.value.field_path == "entries[0].payload"


def test_a_plain_text_is_compared_with_the_recomputed_one_even_with_big_integers() -> None:
    draft = consumer_drafts()[0]
    received = draft.entries[0]
    payload = {**received.payload, "big": 10**30}
    right = canonical_text(payload)
    entry = EntryDraft(received.kind, payload, canonical=right)
    assert (
        prepare(dataclasses.replace(draft, entries=[entry, *draft.entries[1:]])).entries[0].payload_canonical
        == right
    )
    wrong = right.replace(str(10**30), str(10**30 + 1))
    entry = EntryDraft(received.kind, payload, canonical=wrong)
    with pytest.raises(InvalidDraftError, match="precomputed canonical text differs"):
        prepare(dataclasses.replace(draft, entries=[entry, *draft.entries[1:]]))


def test_a_step_row_whose_text_does_not_hash_to_its_step_hash_is_still_refused() -> None:
    draft = consumer_drafts()[0]
    step = draft.steps[0]
    bad = dataclasses.replace(step, canonical_step=step.canonical_step.replace("{", "{ ", 1))
    with pytest.raises(InvalidDraftError, match="step_hash is not sha256"):
        prepare(dataclasses.replace(draft, steps=[bad, *draft.steps[1:]]))
