"""Market specification models (Cournot ``core/schemas/market.py``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from engine.schemas.common import SCHEMA_VERSION, StrictModel, UtcDatetime


class ResolutionWindow(StrictModel):
    """The period in which the event must be observed."""

    start: UtcDatetime
    end: UtcDatetime


class SourcePolicy(StrictModel):
    """Whether a source may be used and at what provenance tier."""

    source_id: str = Field(min_length=1)
    kind: str
    allow: bool = True
    min_provenance_tier: int = Field(default=0, ge=0)
    notes: str | None = None


class ResolutionRule(StrictModel):
    """One named rule the market may resolve under."""

    rule_id: str = Field(min_length=1)
    description: str
    priority: int = 0


class ResolutionRules(StrictModel):
    """The market's rules; ``by_priority`` orders them highest first, stable."""

    rules: list[ResolutionRule] = Field(default_factory=list)

    def by_priority(self) -> list[ResolutionRule]:
        """Rules sorted by priority, descending, keeping the given order on ties."""
        return sorted(self.rules, key=lambda rule: -rule.priority)


class DisputePolicy(StrictModel):
    """How long and whether a resolution can be challenged."""

    dispute_window_seconds: int = Field(gt=0)
    allow_challenges: bool = True
    extra: dict[str, Any] = Field(default_factory=dict)


class MarketSpec(StrictModel):
    """A prediction market: question, event definition, window, rules and outcomes."""

    schema_version: str = SCHEMA_VERSION
    market_id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    event_definition: str = Field(min_length=1)
    timezone: str = "UTC"
    resolution_deadline: UtcDatetime
    resolution_window: ResolutionWindow
    resolution_rules: ResolutionRules
    allowed_sources: list[SourcePolicy] = Field(default_factory=list)
    min_provenance_tier: int = Field(default=0, ge=0)
    dispute_policy: DisputePolicy
    market_type: Literal["binary", "multi_choice"] = "binary"
    possible_outcomes: list[str] = Field(default_factory=lambda: ["YES", "NO"], min_length=2)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_outcomes_and_rules(self) -> MarketSpec:
        if not self.resolution_rules.rules:
            raise ValueError("resolution_rules must contain at least one rule")
        if self.market_type == "binary" and self.possible_outcomes != ["YES", "NO"]:
            raise ValueError('binary markets must have possible_outcomes ["YES", "NO"] in that order')
        if self.market_type == "multi_choice" and "INVALID" in self.possible_outcomes:
            raise ValueError("multi_choice outcomes must not list INVALID; it is always implicitly valid")
        return self
