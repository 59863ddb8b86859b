"""``payload_entries``, replay's builder of the three compared entries, makes exactly the entries
the consumer's :func:`submission_draft` makes for them (in the same order, with the spliced
``submission.received`` text), over every corpus bundle the consumer accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.envelope import DecodedEnvelope, EnvelopeError, decode_envelope, wrap_inputs
from engine.envelope_inputs import encode_envelope
from engine.pipeline import run_pipeline
from ledger.store.drafts import payload_entries, submission_draft
from ledger.store.hashing import canonical_text

CORPUS = Path(__file__).resolve().parents[2] / "samples" / "corpus"
COMPARED = ("submission.received", "audit.completed", "verdict.issued")


def _decoded(path: Path) -> DecodedEnvelope | None:
    """The envelope the consumer decodes for a corpus file, or None when it refuses it."""
    document = json.loads(path.read_text())
    envelope = wrap_inputs(document["prompt_spec"], document["evidence_bundle"], event_id=path.stem)
    try:
        return decode_envelope(encode_envelope(envelope))
    except EnvelopeError:
        return None


ACCEPTED = [path for path in sorted(CORPUS.glob("*.json")) if _decoded(path) is not None]


def test_the_corpus_gives_bundles_to_compare() -> None:
    assert len(ACCEPTED) >= 30


@pytest.mark.parametrize("path", ACCEPTED, ids=lambda path: path.stem)
def test_payload_entries_equal_the_drafts_entries(path: Path) -> None:
    decoded = _decoded(path)
    assert decoded is not None
    result = run_pipeline(
        decoded.envelope.prompt_spec,
        decoded.envelope.evidence_bundle,
        prompt_spec_canonical=decoded.prompt_spec_canonical,
    )
    draft = [entry for entry in submission_draft(decoded, result, None).entries if entry.kind in COMPARED]
    built = payload_entries(decoded, result)
    assert [entry.kind for entry in built] == list(COMPARED) == [entry.kind for entry in draft]
    for mine, theirs in zip(built, draft, strict=True):
        assert mine.canonical == theirs.canonical
        assert canonical_text(mine.payload) == canonical_text(theirs.payload)
    assert built[0].canonical is not None  # the spliced text is made, as the consumer makes it
    assert built[0].canonical == canonical_text(built[0].payload)
