"""The decoder's canonical bytes of the inputs are reused for the ``submission.received`` text.

The reused text must equal a fresh canonicalisation of the payload for every corpus and demo
bundle; bytes that do not hash to the payload's committed hashes are never used; replay rebuilds
the text from the stored inputs it decodes itself, so a changed stored bundle is still found.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from engine.canonical import canonical_bytes
from engine.envelope import DecodedEnvelope, inputs_hash, inputs_preimage
from engine.envelope_inputs import decode_stored_inputs
from engine.pipeline import run_pipeline
from ledger.store.drafts import audit_envelope, submission_draft
from ledger.store.hashing import canonical_text, text_sha256
from tests.helpers.consumer_drafts import decoded_bundles


def test_the_carried_bytes_are_the_canonical_inputs_behind_the_inputs_hash() -> None:
    for decoded in decoded_bundles():
        envelope = decoded.envelope
        assert decoded.prompt_spec_canonical == canonical_bytes(envelope.prompt_spec)
        assert decoded.evidence_bundle_canonical == canonical_bytes(envelope.evidence_bundle)
        pair = {"prompt_spec": envelope.prompt_spec, "evidence_bundle": envelope.evidence_bundle}
        preimage = inputs_preimage(decoded.prompt_spec_canonical, decoded.evidence_bundle_canonical)
        assert preimage == canonical_bytes(pair)
        assert decoded.inputs_hash == inputs_hash(envelope) == text_sha256(preimage.decode("utf-8"))


def test_the_reused_received_text_equals_a_fresh_canonicalisation_for_every_bundle() -> None:
    for decoded in decoded_bundles():
        envelope = decoded.envelope
        draft = submission_draft(decoded, run_pipeline(envelope.prompt_spec, envelope.evidence_bundle), None)
        received = draft.entries[0]
        assert received.kind == "submission.received"
        assert received.canonical is not None
        assert received.canonical == canonical_text(received.payload)
        assert decoded.evidence_bundle_canonical.decode("utf-8") in received.canonical


@pytest.mark.parametrize("member", ["evidence_bundle_canonical", "prompt_spec_canonical"])
def test_carried_bytes_that_do_not_hash_to_the_committed_hashes_are_not_used(member: str) -> None:
    decoded = decoded_bundles()[0]
    wrong = getattr(decoded, member).replace(b'"market_id":"', b'"market_id":"x', 1)
    tampered = dataclasses.replace(decoded, **{member: wrong})
    envelope = decoded.envelope
    draft = submission_draft(tampered, run_pipeline(envelope.prompt_spec, envelope.evidence_bundle), None)
    text = draft.entries[0].canonical
    assert text is not None  # the engine's prompt-spec bytes are still spliced
    assert text == canonical_text(draft.entries[0].payload)
    assert wrong.decode("utf-8") not in text


def test_without_carried_bytes_the_text_is_still_the_fresh_canonicalisation() -> None:
    decoded = decoded_bundles()[0]
    bare = DecodedEnvelope(decoded.envelope, decoded.idempotency_key, decoded.inputs_hash)
    envelope = decoded.envelope
    draft = submission_draft(bare, run_pipeline(envelope.prompt_spec, envelope.evidence_bundle), None)
    assert draft.entries[0].canonical == canonical_text(draft.entries[0].payload)


def test_replay_decodes_stored_inputs_itself_and_sees_a_changed_bundle() -> None:
    decoded = decoded_bundles()[0]
    envelope = decoded.envelope
    draft = submission_draft(decoded, run_pipeline(envelope.prompt_spec, envelope.evidence_bundle), None)
    stored_text = draft.entries[0].canonical
    assert stored_text is not None
    stored = json.loads(stored_text)
    stored["evidence_bundle"]["plan_id"] = "another plan"
    redecoded = decode_stored_inputs(stored)
    # the bytes replay reuses are made from the stored inputs it parsed, not carried from the draft
    assert redecoded.evidence_bundle_canonical == canonical_bytes(redecoded.envelope.evidence_bundle)
    assert redecoded.evidence_bundle_canonical != decoded.evidence_bundle_canonical
    rebuilt = submission_draft(
        redecoded,
        run_pipeline(redecoded.envelope.prompt_spec, redecoded.envelope.evidence_bundle),
        None,
    )
    assert rebuilt.entries[0].canonical is not None
    assert rebuilt.entries[0].canonical != stored_text


def test_the_pipeline_given_the_decoders_prompt_spec_bytes_equals_the_pipeline_without_them() -> None:
    for decoded in decoded_bundles():
        spec, bundle = decoded.envelope.prompt_spec, decoded.envelope.evidence_bundle
        carried = run_pipeline(spec, bundle, prompt_spec_canonical=decoded.prompt_spec_canonical)
        fresh = run_pipeline(spec, bundle)
        assert carried.canonical_json() == fresh.canonical_json()
        assert carried.prompt_spec_canonical == fresh.prompt_spec_canonical == canonical_bytes(spec)
        consumer = audit_envelope(decoded)  # the consumer's path passes the decoder's bytes
        assert consumer.entries[-1].payload["roots"] == fresh.roots
