"""The decoder's inputs hash is trusted by identity (``InputsCanonical``), and only by identity.

The draft splices the decoder's canonical bytes of the prompt spec and the evidence bundle into the
``submission.received`` text without hashing the pair again when the decoder's proof was made from
the very objects the payload holds, the very bytes and the very hash; any copied, swapped or
changed object, bytes or hash makes the draft hash the pair itself (and the text stays exact).
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest

from engine.canonical import canonical_bytes
from engine.carried_inputs import InputsCanonical, inputs_preimage
from engine.envelope import DecodedEnvelope, inputs_hash
from engine.pipeline import run_pipeline
from ledger.store.drafts import submission_draft
from ledger.store.hashing import canonical_text
from tests.helpers.consumer_drafts import decoded_bundles


def _counting_preimage(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the draft's own hashing of the pair (``inputs_preimage`` is called only for it)."""
    calls: list[int] = []

    def counted(spec: bytes, bundle: bytes) -> bytes:
        calls.append(1)
        return inputs_preimage(spec, bundle)

    monkeypatch.setattr("ledger.store.drafts.inputs_preimage", counted)
    return calls


def _draft_text(decoded: DecodedEnvelope) -> tuple[str | None, dict[str, object]]:
    envelope = decoded.envelope
    result = run_pipeline(
        envelope.prompt_spec, envelope.evidence_bundle, prompt_spec_canonical=decoded.prompt_spec_canonical
    )
    received = submission_draft(decoded, result, None).entries[0]
    assert received.kind == "submission.received"
    return received.canonical, received.payload


def test_the_proof_holds_the_decoders_bytes_and_the_reference_inputs_hash() -> None:
    for decoded in decoded_bundles():
        proof = decoded.inputs_canonical
        assert proof is not None
        envelope = decoded.envelope
        assert proof.inputs_hash == decoded.inputs_hash == inputs_hash(envelope)
        assert proof.prompt_spec_canonical is decoded.prompt_spec_canonical
        assert proof.evidence_bundle_canonical is decoded.evidence_bundle_canonical
        assert decoded.prompt_spec_canonical == canonical_bytes(envelope.prompt_spec)
        assert proof.vouches_for(
            envelope.prompt_spec,
            envelope.evidence_bundle,
            decoded.prompt_spec_canonical,
            decoded.evidence_bundle_canonical,
            decoded.inputs_hash,
        )


def test_the_consumers_draft_does_not_hash_the_pair_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting_preimage(monkeypatch)
    for decoded in decoded_bundles():
        text, payload = _draft_text(decoded)
        assert text is not None
        assert text == canonical_text(payload)
        assert decoded.evidence_bundle_canonical.decode("utf-8") in text
    assert calls == []


def test_the_proof_refuses_anything_but_the_very_objects_bytes_and_hash() -> None:
    decoded, other = decoded_bundles()[:2]
    envelope = decoded.envelope
    proof = decoded.inputs_canonical
    assert proof is not None
    spec, bundle = envelope.prompt_spec, envelope.evidence_bundle
    spec_bytes, bundle_bytes = decoded.prompt_spec_canonical, decoded.evidence_bundle_canonical
    good = (spec, bundle, spec_bytes, bundle_bytes, decoded.inputs_hash)
    assert proof.vouches_for(*good)
    changes: list[tuple[int, object]] = [
        (0, spec.model_copy()),  # an equal copy is not the object the bytes came from
        (1, bundle.model_copy(deep=True)),
        (0, other.envelope.prompt_spec),  # swapped
        (1, other.envelope.evidence_bundle),
        (2, bytes(bytearray(spec_bytes))),  # equal bytes, another object
        (3, bytes(bytearray(bundle_bytes))),
        (3, other.evidence_bundle_canonical),
        (4, other.inputs_hash),
        (4, decoded.inputs_hash.upper()),
        (4, None),
    ]
    for position, value in changes:
        offered: list[Any] = list(good)
        offered[position] = value
        assert not proof.vouches_for(*offered), (position, value)


def test_the_proof_is_immutable_and_computes_its_own_hash() -> None:
    decoded = decoded_bundles()[0]
    proof = decoded.inputs_canonical
    assert proof is not None
    with pytest.raises(AttributeError):
        proof.inputs_hash = "0x" + "0" * 64
    with pytest.raises(AttributeError):
        proof.evidence_bundle_canonical = b"{}"
    envelope = decoded.envelope
    made = InputsCanonical(
        envelope.prompt_spec, envelope.evidence_bundle, decoded.prompt_spec_canonical, b"{}"
    )
    assert made.inputs_hash != decoded.inputs_hash  # the hash is of the bytes given, never a claim
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(proof)
    with pytest.raises(TypeError, match="not pickled"):
        copy.copy(proof)


@pytest.mark.parametrize(
    "change",
    ["copied_envelope", "evidence_bundle_canonical", "prompt_spec_canonical", "inputs_hash", "other_proof"],
)
def test_a_draft_whose_objects_bytes_or_hash_changed_hashes_the_pair_itself(
    change: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded, other = decoded_bundles()[:2]
    if change == "copied_envelope":
        changed = dataclasses.replace(decoded, envelope=decoded.envelope.model_copy(deep=True))
    elif change == "inputs_hash":
        changed = dataclasses.replace(decoded, inputs_hash=other.inputs_hash)
    elif change == "other_proof":
        changed = dataclasses.replace(decoded, inputs_canonical=other.inputs_canonical)
    elif change == "prompt_spec_canonical":  # equal bytes in another object
        changed = dataclasses.replace(
            decoded, prompt_spec_canonical=bytes(bytearray(decoded.prompt_spec_canonical))
        )
    else:
        changed = dataclasses.replace(
            decoded, evidence_bundle_canonical=bytes(bytearray(decoded.evidence_bundle_canonical))
        )
    calls = _counting_preimage(monkeypatch)
    text, payload = _draft_text(changed)
    assert calls == [1]  # the fallback hashed the pair
    assert text is not None
    assert text == canonical_text(payload)  # the text stays exact whichever bytes were used
