"""Decoded envelopes and submission drafts the way the consumer makes them, from the sample corpora."""

from __future__ import annotations

import json
from pathlib import Path

from consumers.publisher import prepare_document
from engine.envelope import DecodedEnvelope, EnvelopeError, decode_envelope
from ledger.store.drafts import audit_envelope
from ledger.store.records import SubmissionDraft

__all__ = ["BUNDLES", "CORPUS", "consumer_drafts", "decoded_bundles"]

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted((ROOT / "samples" / "corpus").glob("*.json"))
BUNDLES = CORPUS + sorted((ROOT / "devstack" / "demo_corpus" / "bundles").glob("*.json"))


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


def decoded_bundles() -> list[DecodedEnvelope]:
    """Every corpus and demo bundle that passes envelope validation, encoded and decoded as consumed."""
    decoded = []
    for path in BUNDLES:
        try:
            decoded.append(decode_envelope(prepare_document(json.loads(path.read_text())).value))
        except EnvelopeError:
            continue
    assert len(decoded) > 20
    return decoded
