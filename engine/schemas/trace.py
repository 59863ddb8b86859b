"""The reasoning trace in the Module 03 shape (Cournot ``core/por/reasoning_trace.py``).

A step is committed without ``hash_commitment``: ``step_hash = "0x" + sha256(canonical(step))`` is
computed over the step with that field unset (None is dropped from canonical JSON), and the ledger
stores the hash beside the step.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from engine.schemas.common import SCHEMA_VERSION, StrictModel

StepType = Literal["search", "extract", "check", "deduce", "aggregate", "map"]


class TracePolicy(StrictModel):
    """Bounds and decoding policy under which a trace was produced."""

    schema_version: str = SCHEMA_VERSION
    decoding_policy: str = "strict"
    allow_external_sources: bool = False
    max_steps: int = Field(default=200, ge=1)
    extra: dict[str, Any] = Field(default_factory=dict)


class ReasoningStep(StrictModel):
    """One grounded step: what it read (``inputs``), did (``action``) and produced (``output``)."""

    schema_version: str = SCHEMA_VERSION
    step_id: str = Field(min_length=1)
    type: StepType
    inputs: dict[str, Any] = Field(default_factory=dict)
    action: str
    output: dict[str, Any] = Field(default_factory=dict)
    evidence_ids: list[str] = Field(default_factory=list)
    prior_step_ids: list[str] = Field(default_factory=list)
    hash_commitment: str | None = None


class ReasoningTrace(StrictModel):
    """An ordered list of steps under a policy; structure is validated as Cournot's Module 03 does."""

    schema_version: str = SCHEMA_VERSION
    trace_id: str = Field(min_length=1)
    policy: TracePolicy = Field(default_factory=TracePolicy)
    steps: list[ReasoningStep] = Field(default_factory=list)
    evidence_refs: list[str] = Field(default_factory=list)

    @field_validator("evidence_refs")
    @classmethod
    def _unique_refs(cls, refs: list[str]) -> list[str]:
        if len(set(refs)) != len(refs):
            raise ValueError("evidence_refs must be unique")
        return refs

    @model_validator(mode="after")
    def _check_structure(self) -> ReasoningTrace:
        if len(self.steps) > self.policy.max_steps:
            raise ValueError(f"trace has {len(self.steps)} steps, policy allows {self.policy.max_steps}")
        seen: set[str] = set()
        for step in self.steps:
            if step.step_id in seen:
                raise ValueError(f"duplicate step_id {step.step_id!r}")
            for prior in step.prior_step_ids:
                if prior not in seen:
                    raise ValueError(f"step {step.step_id!r} cites {prior!r}, which is not an earlier step")
            seen.add(step.step_id)
        return self
