"""Replay compares whole payload hashes, rebuilt with the consumer's own draft builder."""

from __future__ import annotations

import json
from pathlib import Path

from engine.envelope import ENVELOPE_SCHEMA_ID, ENVELOPE_SCHEMA_VERSION, decode_envelope
from engine.pipeline import run_pipeline
from ledger.replay.compare import StoredArtifacts, compare_run
from ledger.store.drafts import submission_draft
from ledger.store.hashing import canonical_text

BUNDLE = (
    Path(__file__).resolve().parents[2]
    / "devstack"
    / "demo_corpus"
    / "bundles"
    / "01_btc_above_100k_clean.json"
)
COMPARED = ("submission.received", "audit.completed", "verdict.issued")


def _stored(texts: dict[str, str], draft_steps: list[tuple[str, str, str]], version: str) -> StoredArtifacts:
    return StoredArtifacts(
        engine_version=version,
        received=json.loads(texts["submission.received"]),
        audit=json.loads(texts["audit.completed"]),
        verdict=json.loads(texts["verdict.issued"]),
        step_ids=[step_id for step_id, _, _ in draft_steps],
        step_hashes=[step_hash for _, step_hash, _ in draft_steps],
        step_texts=[text for _, _, text in draft_steps],
        payload_texts=texts,
    )


def test_identical_and_a_changed_field_no_payload_part_covers() -> None:
    document = {"schema_id": ENVELOPE_SCHEMA_ID, "schema_version": ENVELOPE_SCHEMA_VERSION}
    decoded = decode_envelope(json.dumps({**document, **json.loads(BUNDLE.read_text())}).encode())
    result = run_pipeline(decoded.envelope.prompt_spec, decoded.envelope.evidence_bundle)
    draft = submission_draft(decoded, result, None)
    texts = {entry.kind: canonical_text(entry.payload) for entry in draft.entries if entry.kind in COMPARED}
    steps = [(step.step_id, step.step_hash, step.canonical_step) for step in draft.steps]

    same = compare_run(_stored(texts, steps, result.engine_version), result, draft)
    assert (same.status, same.differing) == ("identical", ())

    # inputs_hash is in no payload part replay used to compare: only the whole payload hash sees it
    received = json.loads(texts["submission.received"])
    received["inputs_hash"] = "0x" + "ab" * 32
    tampered = {**texts, "submission.received": canonical_text(received)}
    outcome = compare_run(_stored(tampered, steps, result.engine_version), result, draft)
    assert outcome.status == "diverged"
    assert outcome.differing == ("submission.received payload",)
    assert outcome.first is not None and "inputs_hash" in outcome.first.diff
