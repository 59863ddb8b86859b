"""The Judge (Module 07): evaluation_variables → DeterministicVerdict, deterministically."""

from engine.judge.agent import JudgeAgent, selected_leaf_refs
from engine.judge.policy import ConfidencePolicy, round_confidence
from engine.judge.rules import (
    R_BINARY_DECISION,
    R_CONFIDENCE,
    R_CONFLICT,
    R_INVALID_FALLBACK,
    R_MULTI_CHOICE,
    R_VALIDITY,
    Decision,
    map_to_verdict,
)
from engine.judge.schema_lock import DETERMINISTIC_VERDICT_REF, SchemaLock
from engine.judge.variables import (
    COMPARATORS,
    EvaluationSource,
    EvaluationVariables,
    compare,
    locate_evaluation_variables,
    parse_evaluation_variables,
)

__all__ = [
    "COMPARATORS",
    "DETERMINISTIC_VERDICT_REF",
    "R_BINARY_DECISION",
    "R_CONFIDENCE",
    "R_CONFLICT",
    "R_INVALID_FALLBACK",
    "R_MULTI_CHOICE",
    "R_VALIDITY",
    "ConfidencePolicy",
    "Decision",
    "EvaluationSource",
    "EvaluationVariables",
    "JudgeAgent",
    "SchemaLock",
    "compare",
    "locate_evaluation_variables",
    "map_to_verdict",
    "parse_evaluation_variables",
    "round_confidence",
    "selected_leaf_refs",
]
