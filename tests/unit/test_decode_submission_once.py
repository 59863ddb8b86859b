"""``decode_submission`` parses an envelope file once and validates that document, instead of handing
the bytes to ``decode_envelope`` to be parsed again: the verdict must be the very one
``decode_envelope`` gives those bytes (the same decoded values, or the same refusal).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.envelope import DecodedEnvelope, EnvelopeError, decode_envelope, wrap_inputs
from engine.envelope_inputs import decode_submission
from tests.golden.regenerate import CORPUS_DIR


def _verdict(decode: Any, raw: bytes) -> tuple[Any, ...]:
    try:
        decoded: DecodedEnvelope = decode(raw)
    except EnvelopeError as exc:
        return ("refused", exc.reason, exc.message, exc.path, exc.problems)
    return (
        "decoded",
        decoded.envelope.model_dump(mode="json"),
        decoded.idempotency_key,
        decoded.inputs_hash,
        decoded.prompt_spec_canonical,
        decoded.evidence_bundle_canonical,
        None
        if decoded.evidence_items_canonical is None
        else decoded.evidence_items_canonical.preimages_for(decoded.envelope.evidence_bundle),
    )


def _envelopes() -> list[bytes]:
    values = []
    for path in sorted(CORPUS_DIR.glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        values.append(json.dumps(wrap_inputs(document["prompt_spec"], document["evidence_bundle"])).encode())
    return values


def test_corpus_envelopes_get_the_consumers_verdict() -> None:
    decoded = 0
    for raw in _envelopes():
        verdict = _verdict(decode_submission, raw)
        assert verdict == _verdict(decode_envelope, raw)
        decoded += verdict[0] == "decoded"
    assert decoded > 30


HOSTILE = [
    b"[1, 2]",
    b'"text"',
    b"null",
    b"12",
    b'{"schema_id": "other"}',
    b'{"schema_version": 1}',
    b'{"schema_id": "cournot-ledger/evidence-envelope", "schema_version": 3}',
    b'{"schema_id": "cournot-ledger/evidence-envelope", "schema_version": true}',
    b'{"schema_id": "cournot-ledger/evidence-envelope", "schema_version": 1, "x": NaN}',
    b'{"schema_id": "cournot-ledger/evidence-envelope", "schema_version": 1, "a": 1, "a": 2}',
    b'{"schema_id": "cournot-ledger/evidence-envelope", "schema_version": 1, "a": 1e-400}',
    b'{"schema_id": "cournot-ledger/evidence-envelope", "schema_version": 1, "a": "\\u0000"}',
    b'{"schema_id": "cournot-ledger/evidence-envelope", "schema_version": 1, "a": "\\ud800"}',
    b'{"schema_id": "cournot-ledger/evidence-envelope", "schema_version": 1}',
    b'{"schema_id": "cournot-ledger/evidence-envelope", "schema_version": 1, "n": ' + b"9" * 400 + b"}",
    b'{"schema_version": 2, "schema_id": "cournot-ledger/evidence-envelope", "prompt_spec": {}}',
    b"[" * 70 + b"]" * 70,
    b'{"schema_id": 1, "d": ' + b"[" * 70 + b"]" * 70 + b"}",
]


@pytest.mark.parametrize("raw", HOSTILE)
def test_hostile_envelopes_get_the_consumers_refusal(raw: bytes) -> None:
    verdict = _verdict(decode_submission, raw)
    assert verdict[0] == "refused"
    assert verdict == _verdict(decode_envelope, raw)


def test_an_envelope_with_a_changed_member_gets_the_consumers_verdict() -> None:
    raw = _envelopes()[0]
    document = json.loads(raw)
    document["evidence_bundle"]["market_id"] = "another"
    changed = json.dumps(document).encode()
    verdict = _verdict(decode_submission, changed)
    assert verdict[0] == "refused"
    assert verdict == _verdict(decode_envelope, changed)
