"""The deterministic verdict (Cournot ``core/schemas/verdict.py``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from engine.schemas.common import SCHEMA_VERSION, StrictModel, UtcDatetime


class DeterministicVerdict(StrictModel):
    """The Judge's outcome for a market, with references to the committed roots."""

    schema_version: str = SCHEMA_VERSION
    market_id: str = Field(min_length=1)
    outcome: str
    confidence: float = Field(ge=0, le=1)
    resolution_time: UtcDatetime | None = None
    resolution_rule_id: str = Field(min_length=1)
    prompt_spec_hash: str | None = None
    evidence_root: str | None = None
    reasoning_root: str | None = None
    justification_hash: str | None = None
    selected_leaf_refs: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("resolution_rule_id")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("resolution_rule_id must not be whitespace only")
        return value
