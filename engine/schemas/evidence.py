"""Evidence models (Cournot ``core/schemas/evidence.py``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from engine.schemas.common import SCHEMA_VERSION, StrictModel, UtcDatetime


class Provenance(StrictModel):
    """Where an evidence item came from. Tier: 0 self-reported … 3 official, 4 cryptographic."""

    source_id: str = Field(min_length=1)
    source_uri: str = Field(min_length=1)
    tier: Literal[0, 1, 2, 3, 4] = 1
    fetched_at: UtcDatetime | None = None
    receipt_id: str | None = None
    content_hash: str | None = None
    cache_hit: bool = False
    ttl_seconds: int | None = None


class EvidenceItem(StrictModel):
    """One fetched piece of evidence. It is usable when ``success`` and ``error is None``."""

    evidence_id: str = Field(min_length=1)
    requirement_id: str = Field(min_length=1)
    provenance: Provenance
    raw_content: str | None = None
    content_type: str = "application/json"
    parsed_value: Any = None
    success: bool = True
    error: str | None = None
    status_code: int | None = None
    extracted_fields: dict[str, Any] = Field(default_factory=dict)

    @property
    def is_valid(self) -> bool:
        """True when the fetch succeeded and carried no error."""
        return self.success and self.error is None


class EvidenceBundle(StrictModel):
    """What a collector fetched for one market. Only ``items`` are committed in ``evidence_root``."""

    schema_version: str = SCHEMA_VERSION
    bundle_id: str = Field(min_length=1)
    market_id: str = Field(min_length=1)
    plan_id: str = Field(min_length=1)
    collector_name: str | None = None
    weight: float = Field(default=1.0, ge=0, le=10)
    items: list[EvidenceItem] = Field(default_factory=list)
    collected_at: UtcDatetime | None = None
    execution_time_ms: float | None = None
    total_sources_attempted: int = 0
    total_sources_succeeded: int = 0
    requirements_fulfilled: list[str] = Field(default_factory=list)
    requirements_unfulfilled: list[str] = Field(default_factory=list)

    def duplicate_evidence_ids(self) -> list[str]:
        """Evidence ids that occur more than once, in first-seen order (Cournot does not check)."""
        seen: set[str] = set()
        duplicates: list[str] = []
        for item in self.items:
            if item.evidence_id in seen and item.evidence_id not in duplicates:
                duplicates.append(item.evidence_id)
            seen.add(item.evidence_id)
        return duplicates
