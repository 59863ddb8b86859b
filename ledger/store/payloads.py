"""Builders for entry payloads in the shapes the SQL views read (docs/event-store.md §4).

Each returns a plain dict; pydantic models are accepted anywhere a dict is and are canonicalised
by the store. Keys read by the views: ``verification_result``, ``evaluation_variables`` and
``roots`` (audit), ``verdict`` and ``roots`` (verdict), ``reason_code``, ``message``,
``field_path``, ``raw_*`` and ``dlq`` (rejection).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from typing import Any

from ledger.store.hashing import canonical_text, step_hash
from ledger.store.records import EntryDraft, StepDraft, new_entry_draft

RAW_INLINE_LIMIT = 65_536  # rejected raw bytes up to this size are stored as base64; larger: sha256 only


def received_payload(
    *,
    prompt_spec: Any,
    evidence_bundle: Any,
    prompt_spec_hash: str,
    evidence_root: str | None = None,
    envelope_options: Mapping[str, Any] | None = None,
    **input_hashes: str,
) -> dict[str, Any]:
    """``submission.received``: the canonical inputs, their hashes and the envelope options."""
    payload: dict[str, Any] = {
        "prompt_spec": prompt_spec,
        "evidence_bundle": evidence_bundle,
        "prompt_spec_hash": prompt_spec_hash,
        "evidence_root": evidence_root,
        "envelope_options": dict(envelope_options or {}),
    }
    payload.update(input_hashes)
    return payload


def step_draft(step_index: int, step: Any) -> StepDraft:
    """A :class:`StepDraft` from a step dict or model; the hash is over its canonical text."""
    canonical = canonical_text(step)
    plain: Mapping[str, Any] = step if isinstance(step, Mapping) else step.model_dump(mode="python")
    return StepDraft(
        step_index=step_index,
        step_id=str(plain["step_id"]),
        step_type=str(plain.get("type", plain.get("step_type", ""))),
        evidence_ids=tuple(plain.get("evidence_ids") or ()),
        step_hash=step_hash(canonical),
        canonical_step=canonical,
    )


def trace_step_payload(step: StepDraft) -> dict[str, Any]:
    """``trace.step``: the step's position and hash; the step body is stored in the same entry row
    (its step columns, the ``trace_steps`` view), committed to by ``step_hash``."""
    return {
        "step_index": step.step_index,
        "step_id": step.step_id,
        "step_type": step.step_type,
        "step_hash": step.step_hash,
    }


def trace_step_entry(step: StepDraft) -> EntryDraft:
    """The ``trace.step`` entry that pairs with ``step``."""
    return new_entry_draft("trace.step", trace_step_payload(step))


def audit_payload(
    *,
    verification_result: Any,
    roots: Any,
    evaluation_variables: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """``audit.completed``: VerificationResult, PoR roots (with leaf counts), evaluation_variables."""
    return {
        "verification_result": verification_result,
        "roots": roots,
        "evaluation_variables": dict(evaluation_variables or {}),
        **extra,
    }


def verdict_payload(*, verdict: Any, roots: Any, **extra: Any) -> dict[str, Any]:
    """``verdict.issued``: the DeterministicVerdict and the PoR roots."""
    return {"verdict": verdict, "roots": roots, **extra}


def rejection_payload(
    *,
    reason_code: str,
    message: str,
    field_path: str | None = None,
    raw: bytes | None = None,
    dlq_topic: str | None = None,
    dlq_partition: int | None = None,
    dlq_offset: int | None = None,
    raw_inline_limit: int = RAW_INLINE_LIMIT,
) -> dict[str, Any]:
    """``submission.rejected``: why, where, and the raw bytes (base64 up to the bound, else sha256 only)."""
    payload: dict[str, Any] = {"reason_code": reason_code, "message": message, "field_path": field_path}
    if raw is not None:
        payload["raw_size"] = len(raw)
        payload["raw_sha256"] = "0x" + hashlib.sha256(raw).hexdigest()
        if len(raw) <= raw_inline_limit:
            payload["raw_base64"] = base64.b64encode(raw).decode("ascii")
    if dlq_topic is not None:
        payload["dlq"] = {"topic": dlq_topic, "partition": dlq_partition, "offset": dlq_offset}
    return payload
