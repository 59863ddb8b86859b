"""The draft's step rows and ``trace.step`` entries, built with their ``__dict__`` set at once, are
the very records the dataclass constructors and :func:`~ledger.store.payloads.trace_step_entry` make;
the pipeline result's carried bytes, read from pydantic's private dict, are its private attributes."""

from __future__ import annotations

import dataclasses
import pickle
from collections import OrderedDict
from typing import Any, cast

import pytest

from engine.pipeline import PipelineResult, run_pipeline
from ledger.errors import InvalidDraftError
from ledger.store.drafts import _CHECKED_KINDS, _new_entry
from ledger.store.payloads import trace_step_entry
from ledger.store.records import ENTRY_KINDS, EntryDraft, StepDraft
from tests.helpers.consumer_drafts import consumer_drafts, decoded_bundles


def test_every_step_row_and_trace_step_entry_equals_the_constructed_one() -> None:
    step_fields = [field.name for field in dataclasses.fields(StepDraft)]
    entry_fields = [field.name for field in dataclasses.fields(EntryDraft)]
    seen = 0
    for draft in consumer_drafts():
        entries = [entry for entry in draft.entries if entry.kind == "trace.step"]
        assert len(entries) == len(draft.steps)
        for step, entry in zip(draft.steps, entries, strict=True):
            assert type(step) is StepDraft and type(entry) is EntryDraft
            assert list(vars(step)) == step_fields  # a field added to StepDraft fails here
            assert list(vars(entry)) == entry_fields
            made = StepDraft(**{name: getattr(step, name) for name in step_fields})
            assert step == made and repr(step) == repr(made) and hash(step) == hash(made)
            assert pickle.loads(pickle.dumps(step)) == made
            assert entry == trace_step_entry(made)
            assert repr(entry) == repr(trace_step_entry(made))
            assert type(step.evidence_ids) is tuple
            seen += 1
    assert seen > 20


def test_the_records_stay_frozen() -> None:
    draft = consumer_drafts()[0]
    step = draft.steps[0]
    entry = draft.entries[1]
    for record, name in ((step, "step_hash"), (entry, "payload")):
        try:
            setattr(record, name, None)
        except dataclasses.FrozenInstanceError:
            continue
        raise AssertionError(f"{type(record).__name__} is not frozen")


def test_the_results_carried_bytes_read_as_the_private_attributes_are() -> None:
    decoded = decoded_bundles()[0]
    envelope = decoded.envelope
    result = run_pipeline(
        envelope.prompt_spec, envelope.evidence_bundle, prompt_spec_canonical=decoded.prompt_spec_canonical
    )
    assert result.step_canonical == result._step_canonical and len(result.step_canonical) == len(
        result.trace.steps
    )
    assert result.prompt_spec_canonical is result._prompt_spec_canonical is decoded.prompt_spec_canonical
    copied = result.model_copy()
    assert copied.step_canonical == result.step_canonical
    rebuilt = PipelineResult.model_validate(result.model_dump())  # built outside run_pipeline: none
    assert rebuilt.step_canonical == () and rebuilt.prompt_spec_canonical == b""
    bare = PipelineResult.model_construct(**dict(result))
    assert bare.step_canonical == bare._step_canonical
    assert bare.prompt_spec_canonical == bare._prompt_spec_canonical


def test_every_entry_equals_the_constructed_one_and_its_kind_is_a_known_one() -> None:
    assert _CHECKED_KINDS.issubset(ENTRY_KINDS)
    entry_fields = [field.name for field in dataclasses.fields(EntryDraft)]
    for draft in consumer_drafts():
        assert [entry.kind for entry in draft.entries][:1] == ["submission.received"]
        for entry in draft.entries:
            assert list(vars(entry)) == entry_fields
            made = EntryDraft(entry.kind, entry.payload, entry.canonical)
            assert entry == made and repr(entry) == repr(made)
            assert type(entry.payload) is dict


def test_an_entry_the_fast_path_cannot_vouch_for_goes_through_the_constructors_checks() -> None:
    with pytest.raises(InvalidDraftError, match="unknown entry kind"):
        _new_entry("no.such.kind", {})
    with pytest.raises(InvalidDraftError, match="payload must be a dict"):
        _new_entry("trace.step", cast(Any, []))
    ordered = _new_entry("trace.step", OrderedDict(a=1))  # a dict subclass goes through the constructor
    assert ordered == EntryDraft("trace.step", OrderedDict(a=1)) and type(ordered.payload) is OrderedDict
    assert _new_entry("reasoning.verified", {"a": 1}) == EntryDraft("reasoning.verified", {"a": 1})
