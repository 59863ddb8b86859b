"""Response shapes of the JSON API (they are the OpenAPI document's schemas)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = [
    "Entry",
    "EntryProof",
    "Health",
    "StepProof",
    "Submission",
    "SubmissionDetail",
    "SubmissionPage",
]

HEX32 = r"^0x[0-9a-f]{64}$"


class Submission(BaseModel):
    """One submission, as listed."""

    submission_id: str = Field(pattern=HEX32)
    idempotency_key: str
    market_id: str | None
    bundle_id: str | None
    status: str = Field(description="audited, rejected or por_verified")
    engine_version: str
    first_seq: int = Field(description="global_seq of its first entry (the pagination key)")
    received_at: str | None
    appended_at: str


class SubmissionPage(BaseModel):
    """A page of submissions in global order; pass ``next_after`` as ``after`` for the next page."""

    items: list[Submission]
    next_after: int | None = Field(description="null on the last page")


class Entry(BaseModel):
    """One ledger entry: its committed columns and its payload."""

    global_seq: int
    stream_seq: int
    kind: str
    payload: Any = Field(description="the payload, parsed from payload_canonical")
    payload_canonical: str = Field(description="the exact text payload_hash commits to")
    payload_hash: str = Field(pattern=HEX32)
    prev_hash: str = Field(pattern=HEX32)
    entry_hash: str = Field(pattern=HEX32)
    engine_version: str


class Step(BaseModel):
    """One reasoning step: its canonical text and the hash of that text."""

    step_index: int
    step_id: str
    step_type: str
    evidence_ids: list[str]
    canonical_step: str
    step_hash: str = Field(pattern=HEX32)
    global_seq: int


class SubmissionDetail(BaseModel):
    """A submission with its entries, steps, verdict and roots."""

    submission: Submission
    entries: list[Entry]
    steps: list[Step]
    verdict: dict[str, Any] | None
    roots: dict[str, Any] | None
    audit_ok: bool | None = Field(description="the Auditor's verification result (null if rejected)")
    rejection: dict[str, Any] | None


class CournotProofPacket(BaseModel):
    """A Cournot Merkle inclusion proof: siblings bottom-up, parent = sha256(left || right)."""

    tree: str
    leaf: str = Field(pattern=HEX32)
    index: int
    siblings: list[str]
    root: str = Field(pattern=HEX32)
    leaf_count: int


class StepProof(BaseModel):
    """A step's proof in the submission's reasoning tree, against its committed reasoning_root."""

    submission_id: str = Field(pattern=HEX32)
    step_index: int
    step_hash: str = Field(pattern=HEX32)
    canonical_step: str
    reasoning_root: str = Field(pattern=HEX32)
    reasoning_leaf_count: int
    proof: CournotProofPacket


class EntryProof(BaseModel):
    """An RFC 6962 inclusion proof of one entry against a signed checkpoint (``ledger prove`` format)."""

    format: str
    entry: dict[str, Any]
    leaf_index: int
    leaf_hash: str = Field(pattern=HEX32)
    tree_size: int
    root_hash: str = Field(pattern=HEX32)
    inclusion_path: list[str]
    checkpoint: str | None


class ConsistencyProof(BaseModel):
    """An RFC 6962 consistency proof between two tree sizes (``ledger prove --consistency`` format)."""

    format: str
    old_size: int
    new_size: int
    old_root: str = Field(pattern=HEX32)
    new_root: str = Field(pattern=HEX32)
    consistency_path: list[str]
    old_checkpoint: str | None
    new_checkpoint: str | None


class AuditResult(BaseModel):
    """What the consumer would commit for this envelope; nothing is stored."""

    idempotency_key: str
    inputs_hash: str = Field(pattern=HEX32)
    market_id: str
    stored: bool = Field(description="always false: a dry run")
    result: dict[str, Any] = Field(description="the engine's PipelineResult (trace, verdict, roots, ...)")


class Health(BaseModel):
    """Liveness and what the log holds."""

    status: str
    tree_size: int
    checkpoint_size: int | None
