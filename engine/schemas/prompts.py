"""Prompt specification models (Cournot ``core/schemas/prompts.py`` and ``transport.py``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from engine.schemas.common import SCHEMA_VERSION, StrictModel, UtcDatetime
from engine.schemas.market import MarketSpec


class SourceTarget(StrictModel):
    """One place a collector should fetch evidence from; ``uri`` is opaque, never normalised."""

    source_id: str = Field(min_length=1)
    uri: str = Field(min_length=1)
    method: Literal["GET", "POST", "RPC", "WS", "OTHER"] = "GET"
    expected_content_type: Literal["json", "text", "html", "bytes"] = "json"
    headers: dict[str, str] = Field(default_factory=dict)
    params: dict[str, Any] = Field(default_factory=dict)
    body: dict[str, Any] | str | None = None
    auth_ref: str | None = None
    cache_ttl_seconds: int | None = Field(default=None, ge=0)
    operation: Literal["fetch", "search"] | None = None
    search_query: str | None = None
    notes: str | None = None


class SelectionPolicy(StrictModel):
    """How several sources for one requirement are reconciled."""

    strategy: Literal["single_best", "multi_source_quorum", "fallback_chain"]
    min_sources: int = Field(default=1, ge=1)
    max_sources: int = Field(default=3, ge=1)
    quorum: int = Field(default=1, ge=1)
    tie_breaker: Literal["highest_provenance", "source_priority", "most_recent"] = "highest_provenance"

    @model_validator(mode="after")
    def _check_bounds(self) -> SelectionPolicy:
        if self.quorum > self.max_sources:
            raise ValueError("quorum must be <= max_sources")
        if self.min_sources > self.max_sources:
            raise ValueError("min_sources must be <= max_sources")
        return self


class PredictionSemantics(StrictModel):
    """What is being predicted: entity, predicate, optional threshold text and timeframe."""

    target_entity: str = Field(min_length=1)
    predicate: str = Field(min_length=1)
    threshold: str | None = None
    timeframe: str | None = None


class DataRequirement(StrictModel):
    """One piece of evidence the market needs; ``source_targets`` order is semantic."""

    requirement_id: str = Field(min_length=1)
    description: str = Field(min_length=1)
    source_targets: list[SourceTarget] = Field(default_factory=list)
    selection_policy: SelectionPolicy
    deferred_source_discovery: bool = False
    min_provenance_tier: int = Field(default=0, ge=0)
    expected_fields: list[str] | None = None
    preferred_sources: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check_targets(self) -> DataRequirement:
        if not self.source_targets and not self.deferred_source_discovery:
            raise ValueError("source_targets must be non-empty unless deferred_source_discovery is true")
        return self


class PromptSpec(StrictModel):
    """The compiled market prompt: market, semantics, data requirements and conventions in ``extra``."""

    schema_version: str = SCHEMA_VERSION
    task_type: str = "prediction_resolution"
    market: MarketSpec
    prediction_semantics: PredictionSemantics
    data_requirements: list[DataRequirement] = Field(default_factory=list)
    output_schema_ref: str = "core.schemas.verdict.DeterministicVerdict"
    forbidden_behaviors: list[str] = Field(default_factory=list)
    created_at: UtcDatetime | None = None
    tool_plan: Any | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class ToolPlan(StrictModel):
    """The collector's plan (carried for completeness; never committed by the auditor)."""

    plan_id: str = Field(min_length=1)
    requirements: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)
    min_provenance_tier: int = 0
    allow_fallbacks: bool = True
    extra: dict[str, Any] = Field(default_factory=dict)
