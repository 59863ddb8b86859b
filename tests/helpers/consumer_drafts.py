"""Submission drafts the way the consumer makes them, from the sample corpus."""

from __future__ import annotations

import json
from pathlib import Path

from consumers.publisher import prepare_document
from engine.envelope import EnvelopeError, decode_envelope
from ledger.store.drafts import audit_envelope
from ledger.store.records import SubmissionDraft

__all__ = ["CORPUS", "consumer_drafts"]

CORPUS = sorted((Path(__file__).resolve().parents[2] / "samples" / "corpus").glob("*.json"))


def consumer_drafts() -> list[SubmissionDraft]:
    """One audited draft per corpus bundle that passes envelope validation (encoded, then decoded)."""
    drafts = []
    for path in CORPUS:
        try:
            decoded = decode_envelope(prepare_document(json.loads(path.read_text())).value)
        except EnvelopeError:
            continue
        drafts.append(audit_envelope(decoded))
    assert drafts
    return drafts
