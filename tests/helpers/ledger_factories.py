"""Builders of ledger drafts and an independent chain check, shared by the ledger tests and workers."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import psycopg

from engine.version import ENGINE_VERSION
from ledger.connect import libpq_url
from ledger.store.hashing import GENESIS_PREV_HASH, entry_hash_reference
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


def chain_problems(database_url: str) -> list[str]:
    """Recompute every payload hash and chain link from the stored canonical text; list what fails."""
    problems: list[str] = []
    with psycopg.connect(libpq_url(database_url)) as conn:
        rows = conn.execute(
            "SELECT global_seq, submission_id, stream_seq, kind, payload_canonical, payload_hash, prev_hash, "
            "entry_hash, engine_version FROM ledger_store.entries ORDER BY submission_id, stream_seq"
        ).fetchall()
    previous: dict[str, tuple[int, str]] = {}
    for seq, stream, stream_seq, kind, text, payload_hash, prev_hash, entry_hash, version in rows:
        if "0x" + hashlib.sha256(text.encode()).hexdigest() != payload_hash:
            problems.append(f"seq {seq}: payload_hash does not match payload_canonical")
        last_seq, last_hash = previous.get(stream, (0, GENESIS_PREV_HASH))
        if stream_seq != last_seq + 1 or prev_hash != last_hash:
            problems.append(f"seq {seq}: chain broken at {stream}#{stream_seq}")
        if entry_hash_reference(stream, stream_seq, kind, payload_hash, prev_hash, version) != entry_hash:
            problems.append(f"seq {seq}: entry_hash does not recompute")
        previous[stream] = (stream_seq, entry_hash)
    return problems


def row_counts(database_url: str) -> dict[str, int]:
    """Row count of every ledger_store table (to prove that nothing was written)."""
    tables = ("submissions", "entries", "trace_steps", "consumer_offsets", "idempotency_conflicts")
    with psycopg.connect(libpq_url(database_url)) as conn:
        counts: dict[str, int] = {}
        for table in tables:
            row = conn.execute(f"SELECT count(*) FROM ledger_store.{table}").fetchone()
            counts[table] = int(row[0]) if row else 0
    return counts


def fetch_all(database_url: str, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run one query on a fresh connection."""
    with psycopg.connect(libpq_url(database_url)) as conn:
        return conn.execute(query, params).fetchall()
