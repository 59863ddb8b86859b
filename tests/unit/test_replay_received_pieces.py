"""Replay's byte-level check of the ``submission.received`` payload agrees with the draft builder.

The five pieces joined are exactly the canonical text :func:`payload_entries` makes (and the store's
``canonical_text`` of its payload) for every corpus bundle the consumer accepts, with and without an
event id and with version-2 options; any changed, added or removed byte fails the check; an envelope
without the decoder's proof gets no pieces and replay rebuilds the whole payload as before.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from engine.envelope import DecodedEnvelope, EnvelopeError, decode_envelope, wrap_inputs
from engine.envelope_inputs import encode_envelope
from engine.pipeline import PipelineResult, run_pipeline
from ledger.replay.received import received_identical, received_pieces
from ledger.replay.runner import _identical_fast, replay_case
from ledger.replay.source import ReplayCase
from ledger.store.drafts import payload_entries, submission_draft
from ledger.store.hashing import canonical_text

CORPUS = Path(__file__).resolve().parents[2] / "samples" / "corpus"


def _decoded(path: Path, **options: Any) -> DecodedEnvelope | None:
    document = json.loads(path.read_text())
    envelope = wrap_inputs(document["prompt_spec"], document["evidence_bundle"], **options)
    try:
        return decode_envelope(encode_envelope(envelope))
    except EnvelopeError:
        return None


ACCEPTED = [path for path in sorted(CORPUS.glob("*.json")) if _decoded(path) is not None]
OPTIONS: list[dict[str, Any]] = [
    {},
    {"event_id": "evt-1"},
    {"event_id": 'évènement "quoté" \\ 1', "verify_reasoning": True},
    {"reasoning_query": "Was it above 100k? «sure»", "reasoning_expression": "1 - 2"},
]


def _run(decoded: DecodedEnvelope) -> PipelineResult:
    return run_pipeline(
        decoded.envelope.prompt_spec,
        decoded.envelope.evidence_bundle,
        prompt_spec_canonical=decoded.prompt_spec_canonical,
        evidence_items_canonical=decoded.evidence_items_canonical,
    )


def test_the_corpus_gives_bundles_to_check() -> None:
    assert len(ACCEPTED) >= 30


@pytest.mark.parametrize("options", OPTIONS, ids=lambda options: ",".join(options) or "plain")
@pytest.mark.parametrize("path", ACCEPTED, ids=lambda path: path.stem)
def test_the_pieces_are_the_draft_builders_text(path: Path, options: dict[str, Any]) -> None:
    decoded = _decoded(path, **options)
    assert decoded is not None
    result = _run(decoded)
    pieces = received_pieces(decoded, result)
    assert pieces is not None
    joined = b"".join(pieces)
    entry = payload_entries(decoded, result)[0]
    assert entry.canonical is not None
    assert joined == entry.canonical.encode("utf-8") == canonical_text(entry.payload).encode("utf-8")
    drafted = next(e for e in submission_draft(decoded, result, None).entries if e.kind == entry.kind)
    assert joined == canonical_text(drafted.payload).encode("utf-8")
    assert received_identical(joined, pieces)


def test_any_changed_added_or_removed_byte_fails() -> None:
    decoded = _decoded(ACCEPTED[0], event_id="evt-1")
    assert decoded is not None
    pieces = received_pieces(decoded, _run(decoded))
    assert pieces is not None
    joined = b"".join(pieces)
    starts = [0]
    for piece in pieces:
        starts.append(starts[-1] + len(piece))
    # a byte in each piece (first, middle and last of it), every byte of the small ones
    positions = sorted(
        {at for start, end in itertools.pairwise(starts) for at in (start, (start + end) // 2, end - 1)}
        | set(range(starts[1]))
        | set(range(starts[2], starts[3]))
        | set(range(starts[4], len(joined)))
    )
    for at in positions:
        changed = joined[:at] + bytes([joined[at] ^ 0x01]) + joined[at + 1 :]
        assert not received_identical(changed, pieces), at
    assert not received_identical(joined + b" ", pieces)
    assert not received_identical(b" " + joined, pieces)
    assert not received_identical(joined[:-1], pieces)
    # the spec and the bundle swapped (same total length when moved together) fails too
    head, bundle, middle, spec, tail = pieces
    assert not received_identical(head + spec + middle + bundle + tail, pieces)


def test_without_the_decoders_proof_there_are_no_pieces_and_replay_rebuilds_the_payload() -> None:
    decoded = _decoded(ACCEPTED[0])
    assert decoded is not None
    result = _run(decoded)
    assert received_pieces(dataclasses.replace(decoded, inputs_canonical=None), result) is None
    other = _decoded(ACCEPTED[1])
    assert other is not None and other.inputs_canonical is not None
    swapped = dataclasses.replace(decoded, inputs_canonical=other.inputs_canonical)
    assert received_pieces(swapped, result) is None


def _case(decoded: DecodedEnvelope, received: str | None = None) -> ReplayCase:
    result = _run(decoded)
    draft = submission_draft(decoded, result, None)
    stored = {
        entry.kind: entry.canonical if entry.canonical is not None else canonical_text(entry.payload)
        for entry in draft.entries
    }
    return ReplayCase(
        submission_id="0x" + "22" * 32,
        market_id=decoded.market_id,
        first_seq=1,
        submission_engine_version=result.engine_version,
        entry_versions={"audit.completed": result.engine_version},
        received=received if received is not None else stored["submission.received"],
        audit=stored["audit.completed"],
        verdict=stored["verdict.issued"],
        step_ids=tuple(step.step_id for step in draft.steps),
        step_hashes=tuple(step.step_hash for step in draft.steps),
        step_texts=tuple(step.canonical_step for step in draft.steps),
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda r: r["envelope_options"].update(verify_reasoning="yes"), "submission.received payload"),
        (lambda r: r.update(inputs_hash="0x" + "ab" * 32), "submission.received payload"),
        (lambda r: r.update(evidence_root="0x" + "ab" * 32), "received.evidence_root"),
        (lambda r: r.update(prompt_spec_hash="0x" + "ab" * 32), "received.prompt_spec_hash"),
        (lambda r: r.update(extra="member"), "submission.received payload"),
    ],
)
def test_a_changed_received_member_leaves_the_fast_path_and_diverges(change: Any, expected: str) -> None:
    """(The header and options are inputs, read back by the decoder: a valid change there is replayed
    as stored, as before; a value the decoder reads otherwise is a difference.)"""
    decoded = _decoded(ACCEPTED[0], event_id="evt-1")
    assert decoded is not None
    clean = _case(decoded)
    assert _identical_fast(clean) is not None
    assert replay_case(clean).status == "identical"
    received = json.loads(clean.received or "")
    change(received)
    case = dataclasses.replace(clean, received=canonical_text(received))
    assert _identical_fast(case) is None
    outcome = replay_case(case)
    assert outcome.status == "diverged"
    assert expected in outcome.differing
