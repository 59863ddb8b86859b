"""Audit a validated envelope with the engine pipeline and shape the ledger drafts.

A submission's entries, in stream order: ``submission.received`` (canonical inputs and their
hashes), one ``trace.step`` per step (its row also holds the step body), ``audit.completed``
(VerificationResult, roots, evaluation_variables, the trace header) and ``verdict.issued``.
The reasoning stage's follow-up ``reasoning.verified`` entry is shaped here too
(:func:`reasoning_result_entry`, :func:`reasoning_not_applicable_entry`).
Nothing here depends on the clock, the host or the Kafka coordinates (those travel in
``OperationalInfo``, which is never hashed).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.envelope import DecodedEnvelope, inputs_preimage
from engine.pipeline import PipelineResult, run_pipeline
from engine.schemas import ReasoningStep
from ledger.store.hashing import CanonicalText, canonical_payload
from ledger.store.payloads import (
    audit_payload,
    received_payload,
    step_draft,
    trace_step_entry,
    verdict_payload,
)
from ledger.store.records import (
    EntryDraft,
    OperationalInfo,
    StepDraft,
    SubmissionDraft,
    new_entry_draft,
    new_step_draft,
)

if TYPE_CHECKING:  # the verifier's modules load only where a reasoning entry is built
    from engine.reasoning import ReasoningResult

__all__ = [
    "audit_envelope",
    "committed_reasoning_result",
    "outcome_entries",
    "payload_entries",
    "reasoning_not_applicable_entry",
    "reasoning_result_entry",
    "submission_draft",
]


def text_sha256_bytes(data: bytes) -> str:
    """``0x`` + sha256 of ``data`` (the engine's hash format)."""
    return "0x" + hashlib.sha256(data).hexdigest()


class StepHashMismatchError(RuntimeError):
    """The ledger's step hash differs from the engine's: a bug, never stored."""


def _step_drafts(result: PipelineResult) -> list[StepDraft]:
    """One :class:`StepDraft` per step, reusing the canonical bytes and hashes the engine made.

    ``prepare`` still checks ``step_hash(canonical_step) == step_hash`` for every row, so a wrong
    pairing is refused there. A result built outside ``run_pipeline`` has no canonical bytes: its
    steps are canonicalised here and checked against the engine's hashes.
    """
    steps = result.trace.steps
    texts, hashes = result.step_canonical, result.step_hashes  # read once: each is a model attribute
    if len(texts) != len(steps):
        return [_recomputed_step(index, step, hashes[index]) for index, step in enumerate(steps)]
    return [
        new_step_draft(
            index,
            step.step_id,
            step.type,
            tuple(step.evidence_ids),
            hashes[index],
            texts[index].decode("utf-8"),
        )
        for index, step in enumerate(steps)
    ]


def _recomputed_step(index: int, step: ReasoningStep, engine_hash: str) -> StepDraft:
    draft = step_draft(index, step.model_copy(update={"hash_commitment": None}))
    if draft.step_hash != engine_hash:
        raise StepHashMismatchError(
            f"step {step.step_id}: ledger hash {draft.step_hash} != engine hash {engine_hash}"
        )
    return draft


def _carried_inputs(
    received: dict[str, Any], decoded: DecodedEnvelope, result: PipelineResult
) -> dict[str, bytes]:
    """Canonical bytes already made for the inputs in ``received``, each checked against its hash.

    The decoder's prompt-spec and evidence-bundle bytes are used when the pair they form is the
    preimage of the payload's ``inputs_hash`` (:func:`_pair_is_committed`) and the spec's bytes hash
    to its ``prompt_spec_hash``; else the engine's prompt-spec bytes when they hash to
    ``prompt_spec_hash``; else none.
    """
    spec_hash = received.get("prompt_spec_hash")
    spec, bundle = decoded.prompt_spec_canonical, decoded.evidence_bundle_canonical
    if (
        spec
        and bundle
        and text_sha256_bytes(spec) == spec_hash
        and _pair_is_committed(received, decoded, spec, bundle)
    ):
        return {"prompt_spec": spec, "evidence_bundle": bundle}
    spec = result.prompt_spec_canonical
    if spec and text_sha256_bytes(spec) == spec_hash:
        return {"prompt_spec": spec}
    return {}


def _pair_is_committed(
    received: dict[str, Any], decoded: DecodedEnvelope, spec: bytes, bundle: bytes
) -> bool:
    """Whether ``inputs_hash`` in ``received`` is the SHA-256 of the pair of ``spec`` and ``bundle``.

    Proved by identity when the decoder's :class:`~engine.carried_inputs.InputsCanonical` was made
    from the very spec and bundle objects the payload holds, these very bytes and this hash (the
    decoder hashed that pair); anything else (no proof, a copied or swapped object, other bytes,
    another hash) hashes the pair here, as before.
    """
    committed = received.get("inputs_hash")
    proof = decoded.inputs_canonical
    if proof is not None and proof.vouches_for(
        received.get("prompt_spec"), received.get("evidence_bundle"), spec, bundle, committed
    ):
        return True
    return text_sha256_bytes(inputs_preimage(spec, bundle)) == committed


def _received_canonical(
    received: dict[str, Any], decoded: DecodedEnvelope, result: PipelineResult
) -> CanonicalText | None:
    """Canonical text of the ``submission.received`` payload, reusing the inputs' canonical bytes.

    The object's text is put together member by member in canonical key order
    (:func:`~ledger.store.hashing.canonical_payload`): the members whose bytes were already made
    (:func:`_carried_inputs`) as they are, the others canonicalised with the store's function.
    """
    return canonical_payload(received, _carried_inputs(received, decoded, result))


def submission_draft(
    decoded: DecodedEnvelope, result: PipelineResult, operational: OperationalInfo | None
) -> SubmissionDraft:
    """The audited submission for ``decoded`` given the pipeline's ``result``."""
    roots = result.roots
    received, audited, verdict = payload_entries(decoded, result)
    steps = _step_drafts(result)
    return SubmissionDraft(
        idempotency_key=decoded.idempotency_key,
        market_id=decoded.market_id,
        bundle_id=decoded.envelope.evidence_bundle.bundle_id,
        input_hashes={
            "inputs_hash": decoded.inputs_hash,
            "prompt_spec_hash": roots.prompt_spec_hash,
            "evidence_root": roots.evidence_root,
        },
        status="audited",
        entries=[received, *[trace_step_entry(step) for step in steps], audited, verdict],
        steps=steps,
        operational=operational,
        engine_version=result.engine_version,
    )


def payload_entries(
    decoded: DecodedEnvelope, result: PipelineResult
) -> tuple[EntryDraft, EntryDraft, EntryDraft]:
    """The ``submission.received``, ``audit.completed`` and ``verdict.issued`` entries of the
    submission for ``decoded`` and ``result``: :func:`submission_draft` puts the ``trace.step``
    entries between the first and the second.

    ``ledger replay`` compares these payloads with the stored ones and proves the steps from the
    stored step rows and the engine's hashes, so it calls this alone: no step drafts, ``trace.step``
    entries or :class:`SubmissionDraft` are built.
    """
    envelope = decoded.envelope
    roots = result.roots
    received = received_payload(
        prompt_spec=envelope.prompt_spec,
        evidence_bundle=envelope.evidence_bundle,
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
    audited, verdict = outcome_entries(result)
    return (
        new_entry_draft("submission.received", received, _received_canonical(received, decoded, result)),
        audited,
        verdict,
    )


def outcome_entries(result: PipelineResult) -> tuple[EntryDraft, EntryDraft]:
    """The ``audit.completed`` and ``verdict.issued`` entries of :func:`payload_entries` (they
    depend on the pipeline's result alone)."""
    roots = result.roots
    trace = result.trace
    trace_header = {
        "trace_id": trace.trace_id,
        "policy": trace.policy,
        "evidence_refs": trace.evidence_refs,
        "step_hashes": result.step_hashes,
    }
    return (
        new_entry_draft(
            "audit.completed",
            audit_payload(
                verification_result=result.audit_verification,
                roots=roots,
                evaluation_variables=result.evaluation_variables,
                trace=trace_header,
            ),
        ),
        new_entry_draft(
            "verdict.issued",
            verdict_payload(
                verdict=result.verdict, roots=roots, judge_verification=result.judge_verification
            ),
        ),
    )


def audit_envelope(decoded: DecodedEnvelope, operational: OperationalInfo | None = None) -> SubmissionDraft:
    """Run Auditor and Judge on the envelope's inputs and return the submission draft."""
    envelope = decoded.envelope
    result = run_pipeline(
        envelope.prompt_spec,
        envelope.evidence_bundle,
        prompt_spec_canonical=decoded.prompt_spec_canonical,
        evidence_items_canonical=decoded.evidence_items_canonical,
    )
    return submission_draft(decoded, result, operational)


def committed_reasoning_result(result: ReasoningResult) -> dict[str, Any]:
    """A verifier result as a ``reasoning.verified`` entry commits it (without the operational ``cached``)."""
    data = result.to_dict()
    data.pop("cached", None)  # operational: whether a cache served it
    return data


def _reasoning_payload(
    status: str, attempt: int, audit_entry_hash: str | None, task: Mapping[str, Any]
) -> dict[str, Any]:
    return {"status": status, "attempt": attempt, "audit_entry_hash": audit_entry_hash, "task": dict(task)}


def reasoning_result_entry(
    *,
    status: str,
    attempt: int,
    audit_entry_hash: str | None,
    task: Mapping[str, Any],
    result: ReasoningResult,
) -> EntryDraft:
    """``reasoning.verified`` for a verifier run: status, task, the committed result and its hash."""
    payload = _reasoning_payload(status, attempt, audit_entry_hash, task)
    payload["result"] = committed_reasoning_result(result)
    payload["result_hash"] = result.result_hash()
    return EntryDraft("reasoning.verified", payload)


def reasoning_not_applicable_entry(
    *,
    attempt: int,
    audit_entry_hash: str | None,
    task: Mapping[str, Any],
    reason_code: str | None,
    message: str | None,
    verifier_version: str,
) -> EntryDraft:
    """``reasoning.verified`` when there is nothing to verify: the request is answered, not dropped."""
    payload = _reasoning_payload("not_applicable", attempt, audit_entry_hash, task)
    payload.update(reason_code=reason_code, message=message, verifier_version=verifier_version)
    return EntryDraft("reasoning.verified", payload)
