"""Models of a Cournot PoR pack: the pipeline's own trace dialect, the manifest, and the report.

The trace here is the shape Cournot's agents emit and its ``compute_roots`` hashes (the
``core/schemas/reasoning.py`` model): steps with ``step_type``/``description``/``evidence_refs``/
``depends_on``. The project's own Module 03 trace (:mod:`engine.schemas.trace`) is a different shape.
Every field keeps Cournot's type and default, because defaults are part of each step's hash.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from engine.schemas import StrictModel, UtcDatetime
from engine.schemas.common import SCHEMA_VERSION
from engine.sentinel.challenges import Challenge

__all__ = [
    "CheckStatus",
    "ConflictRecord",
    "EvidenceRef",
    "ManifestEntry",
    "PackCheck",
    "PackManifest",
    "PackReport",
    "PackStatus",
    "PipelineReasoningStep",
    "PipelineReasoningTrace",
]

PipelineStepType = Literal[
    "evidence_analysis",
    "comparison",
    "inference",
    "rule_application",
    "confidence_assessment",
    "conflict_resolution",
    "threshold_check",
    "validity_check",
    "conclusion",
]


class EvidenceRef(StrictModel):
    """A step's citation of one evidence item (``evidence_id`` may be empty, as in Cournot)."""

    evidence_id: str
    requirement_id: str | None = None
    source_id: str | None = None
    field_used: str | None = None
    value_at_reference: Any = None


class PipelineReasoningStep(StrictModel):
    """One step of the pipeline's trace; its canonical JSON is one leaf of ``reasoning_root``."""

    step_id: str = Field(min_length=1)
    step_type: PipelineStepType
    description: str
    evidence_refs: list[EvidenceRef] = Field(default_factory=list)
    rule_id: str | None = None
    input_summary: str | None = None
    output_summary: str | None = None
    conclusion: str | None = None
    confidence_delta: float | None = Field(default=None, ge=-1, le=1)
    depends_on: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


class ConflictRecord(StrictModel):
    """Two or more evidence items that disagree, and how the auditor resolved it."""

    conflict_id: str = Field(min_length=1)
    evidence_ids: list[str] = Field(min_length=2)
    description: str
    resolution: str | None = None
    resolution_rationale: str | None = None
    winning_evidence_id: str | None = None


class PipelineReasoningTrace(StrictModel):
    """The pipeline's trace; only ``steps`` are committed (trace-level fields are not)."""

    schema_version: str = SCHEMA_VERSION
    trace_id: str = Field(min_length=1)
    market_id: str = Field(min_length=1)
    bundle_id: str = Field(min_length=1)
    steps: list[PipelineReasoningStep] = Field(default_factory=list)
    conflicts: list[ConflictRecord] = Field(default_factory=list)
    evidence_summary: str | None = None
    reasoning_summary: str | None = None
    preliminary_outcome: str | None = None
    preliminary_confidence: float | None = Field(default=None, ge=0, le=1)
    recommended_rule_id: str | None = None
    created_at: UtcDatetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    def cited_evidence_ids(self) -> list[str]:
        """Evidence ids cited by any step, in first-seen order."""
        seen: dict[str, None] = {}
        for step in self.steps:
            for ref in step.evidence_refs:
                seen.setdefault(ref.evidence_id, None)
        return list(seen)


class ManifestEntry(StrictModel):
    """One file of a pack: its path inside the pack, SHA-256 (hex, no ``0x``) and size in bytes."""

    path: str = Field(min_length=1)
    sha256: str
    bytes: int = Field(ge=0)


class PackManifest(StrictModel):
    """``manifest.json`` as Cournot's pack writer emits it."""

    format_version: str
    protocol_version: str = "v1"
    market_id: str = ""
    por_root: str = ""
    files: dict[str, ManifestEntry] = Field(default_factory=dict)
    created_at: str | None = None
    notes: dict[str, Any] = Field(default_factory=dict)


CheckStatus = Literal["ok", "warn", "failed", "unverifiable"]
PackStatus = Literal["ok", "failed", "unverifiable"]


class PackCheck(StrictModel):
    """One check of a pack, pinpointed: which file, root, leaf index, step id or evidence id."""

    check_id: str
    status: CheckStatus
    message: str
    file: str | None = None
    root: str | None = None
    leaf_index: int | None = None
    step_id: str | None = None
    evidence_id: str | None = None
    expected: str | None = None
    actual: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)


class PackReport(StrictModel):
    """The verdict on one pack: ``ok`` only if every check passed (warnings allowed)."""

    report_version: str = "por-verification.v1"
    source: str
    status: PackStatus
    market_id: str | None = None
    por_root: str | None = None
    checks: list[PackCheck] = Field(default_factory=list)
    challenges: list[Challenge] = Field(default_factory=list)

    @property
    def failures(self) -> list[PackCheck]:
        """Checks that failed or could not be verified."""
        return [check for check in self.checks if check.status in ("failed", "unverifiable")]
