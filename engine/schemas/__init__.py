"""Cournot-compatible wire models (inputs) and Module 03/06 output models."""

from engine.schemas.common import SCHEMA_VERSION, StrictModel, UtcDatetime
from engine.schemas.errors import CournotError
from engine.schemas.evidence import EvidenceBundle, EvidenceItem, Provenance
from engine.schemas.market import (
    DisputePolicy,
    MarketSpec,
    ResolutionRule,
    ResolutionRules,
    ResolutionWindow,
    SourcePolicy,
)
from engine.schemas.por import PoRBundle, PoRRoots
from engine.schemas.prompts import (
    DataRequirement,
    PredictionSemantics,
    PromptSpec,
    SelectionPolicy,
    SourceTarget,
    ToolPlan,
)
from engine.schemas.trace import ReasoningStep, ReasoningTrace, StepType, TracePolicy
from engine.schemas.verdict import DeterministicVerdict
from engine.schemas.verification import ChallengeKind, ChallengeRef, CheckResult, VerificationResult

__all__ = [
    "SCHEMA_VERSION",
    "ChallengeKind",
    "ChallengeRef",
    "CheckResult",
    "CournotError",
    "DataRequirement",
    "DeterministicVerdict",
    "DisputePolicy",
    "EvidenceBundle",
    "EvidenceItem",
    "MarketSpec",
    "PoRBundle",
    "PoRRoots",
    "PredictionSemantics",
    "PromptSpec",
    "Provenance",
    "ReasoningStep",
    "ReasoningTrace",
    "ResolutionRule",
    "ResolutionRules",
    "ResolutionWindow",
    "SelectionPolicy",
    "SourcePolicy",
    "SourceTarget",
    "StepType",
    "StrictModel",
    "ToolPlan",
    "TracePolicy",
    "UtcDatetime",
    "VerificationResult",
]
