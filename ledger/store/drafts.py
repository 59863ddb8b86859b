"""Audit a validated envelope with the engine pipeline and shape the ledger submission draft.

Entries, in stream order: ``submission.received`` (canonical inputs and their hashes),
one ``trace.step`` per step (paired with its ``trace_steps`` row), ``audit.completed``
(VerificationResult, roots, evaluation_variables, the trace header) and ``verdict.issued``.
Nothing here depends on the clock, the host or the Kafka coordinates (those travel in
``OperationalInfo``, which is never hashed).
"""

from __future__ import annotations

from engine.envelope import DecodedEnvelope
from engine.pipeline import PipelineResult, run_pipeline
from ledger.store.payloads import (
    audit_payload,
    received_payload,
    step_draft,
    trace_step_entry,
    verdict_payload,
)
from ledger.store.records import EntryDraft, OperationalInfo, SubmissionDraft

__all__ = ["audit_envelope", "submission_draft"]


class StepHashMismatchError(RuntimeError):
    """The ledger's step hash differs from the engine's: a bug, never stored."""


def submission_draft(
    decoded: DecodedEnvelope, result: PipelineResult, operational: OperationalInfo | None
) -> SubmissionDraft:
    """The audited submission for ``decoded`` given the pipeline's ``result``."""
    envelope = decoded.envelope
    spec, bundle = envelope.prompt_spec, envelope.evidence_bundle
    roots = result.roots
    input_hashes = {
        "inputs_hash": decoded.inputs_hash,
        "prompt_spec_hash": roots.prompt_spec_hash,
        "evidence_root": roots.evidence_root,
    }
    received = received_payload(
        prompt_spec=spec,
        evidence_bundle=bundle,
        prompt_spec_hash=roots.prompt_spec_hash,
        evidence_root=roots.evidence_root,
        envelope_options=envelope.options.model_dump(mode="json", exclude_none=True),
        inputs_hash=decoded.inputs_hash,
    )
    received["envelope"] = {
        "schema_id": envelope.schema_id,
        "schema_version": envelope.schema_version,
        "event_id": envelope.event_id,
    }
    steps = []
    for index, step in enumerate(result.trace.steps):
        draft = step_draft(index, step.model_copy(update={"hash_commitment": None}))
        if draft.step_hash != result.step_hashes[index]:
            raise StepHashMismatchError(
                f"step {step.step_id}: ledger hash {draft.step_hash} != engine hash {result.step_hashes[index]}"
            )
        steps.append(draft)
    trace_header = {
        "trace_id": result.trace.trace_id,
        "policy": result.trace.policy,
        "evidence_refs": result.trace.evidence_refs,
        "step_hashes": result.step_hashes,
    }
    entries = [
        EntryDraft("submission.received", received),
        *(trace_step_entry(step) for step in steps),
        EntryDraft(
            "audit.completed",
            audit_payload(
                verification_result=result.audit_verification,
                roots=roots,
                evaluation_variables=result.evaluation_variables,
                trace=trace_header,
            ),
        ),
        EntryDraft(
            "verdict.issued",
            verdict_payload(
                verdict=result.verdict, roots=roots, judge_verification=result.judge_verification
            ),
        ),
    ]
    return SubmissionDraft(
        idempotency_key=decoded.idempotency_key,
        market_id=decoded.market_id,
        bundle_id=bundle.bundle_id,
        input_hashes=input_hashes,
        status="audited",
        entries=entries,
        steps=steps,
        operational=operational,
        engine_version=result.engine_version,
    )


def audit_envelope(decoded: DecodedEnvelope, operational: OperationalInfo | None = None) -> SubmissionDraft:
    """Run Auditor and Judge on the envelope's inputs and return the submission draft."""
    envelope = decoded.envelope
    result = run_pipeline(envelope.prompt_spec, envelope.evidence_bundle)
    return submission_draft(decoded, result, operational)
