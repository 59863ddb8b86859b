"""Builders of ledger drafts, shared by the ledger tests and workers."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from engine.version import ENGINE_VERSION
from ledger.store.payloads import (
    audit_payload,
    received_payload,
    rejection_payload,
    step_draft,
    trace_step_entry,
    verdict_payload,
)
from ledger.store.records import EntryDraft, OperationalInfo, SubmissionDraft

HEX_A = "0x" + "a" * 64


def audited(
    key: str,
    *,
    market_id: str = "market-1",
    steps: int = 3,
    variant: int = 0,
    outcome: str = "YES",
    conflict: bool = False,
    insufficient: bool = False,
    offset: int | None = None,
    engine_version: str = ENGINE_VERSION,
) -> SubmissionDraft:
    """An audited submission: received, ``steps`` trace steps, audit.completed, verdict.issued."""
    prompt_spec = {"market_id": market_id, "question": f"Will {market_id} resolve YES?"}
    bundle = {"bundle_id": f"bundle-{key}", "items": [{"evidence_id": "ev_1", "value": 1.0 + variant}]}
    prompt_hash = "0x" + hashlib.sha256(f"{market_id}".encode()).hexdigest()
    bundle_hash = "0x" + hashlib.sha256(f"{key}/{variant}".encode()).hexdigest()
    drafts = [
        step_draft(
            index,
            {
                "step_id": f"step_{index + 1:04d}",
                "type": "extract" if index < steps - 1 else "map",
                "action": f"read evidence {index}",
                "evidence_ids": ["ev_1"],
                "output": {"value": 1.0 + index, "count": index},
            },
        )
        for index in range(steps)
    ]
    roots = {
        "prompt_spec_hash": prompt_hash,
        "evidence_root": bundle_hash,
        "evidence_leaf_count": 1,
        "reasoning_root": HEX_A,
        "reasoning_leaf_count": steps,
        "verdict_hash": HEX_A,
        "por_root": HEX_A,
    }
    entries = [
        EntryDraft(
            "submission.received",
            received_payload(prompt_spec=prompt_spec, evidence_bundle=bundle, prompt_spec_hash=prompt_hash),
        ),
        *(trace_step_entry(draft) for draft in drafts),
        EntryDraft(
            "audit.completed",
            audit_payload(
                verification_result={"ok": not insufficient, "checks": []},
                roots=roots,
                evaluation_variables={
                    "event_observed": outcome == "YES",
                    "conflict_detected": conflict,
                    "insufficient_evidence": insufficient,
                    "numeric_value": 1.0,
                },
            ),
        ),
        EntryDraft(
            "verdict.issued",
            verdict_payload(
                verdict={"market_id": market_id, "outcome": outcome, "confidence": 0.75}, roots=roots
            ),
        ),
    ]
    return SubmissionDraft(
        idempotency_key=key,
        market_id=market_id,
        bundle_id=f"bundle-{key}",
        input_hashes={"prompt_spec_hash": prompt_hash, "evidence_bundle_hash": bundle_hash},
        status="audited",
        entries=entries,
        steps=drafts,
        operational=OperationalInfo(datetime.now(UTC), "evidence-bundles", 0, offset, "test-host"),
        engine_version=engine_version,
    )


def rejected(
    key: str, raw: bytes, *, reason_code: str = "malformed_json", dlq_offset: int = 0
) -> SubmissionDraft:
    """A rejected submission with a single submission.rejected entry."""
    digest = "0x" + hashlib.sha256(raw).hexdigest()
    payload = rejection_payload(
        reason_code=reason_code,
        message="Expecting value: line 1 column 1",
        field_path="$",
        raw=raw,
        dlq_topic="evidence-bundles.dlq",
        dlq_partition=0,
        dlq_offset=dlq_offset,
    )
    return SubmissionDraft(
        idempotency_key=key,
        market_id=None,
        bundle_id=None,
        input_hashes={"raw_sha256": digest},
        status="rejected",
        entries=[EntryDraft("submission.rejected", payload)],
        operational=OperationalInfo(datetime.now(UTC), "evidence-bundles", 0, dlq_offset, "test-host"),
        engine_version=ENGINE_VERSION,
    )
