"""The models the engine builds without re-validation are pinned, field by field.

``engine.schemas.trusted.trusted`` (and the direct constructions that follow its rule) skip
pydantic's validation for values the engine produced itself; the fast paths that use it check by
hand what validation would check (``engine/judge/agent.py``: ``_verdict``/``_verification``;
``engine/pipeline.py``: ``_result``; ``engine/auditor/built_models.py``; the checks and steps of
``engine/auditor``). A field, constraint or validator added to one of these models would not be
enforced there, silently. This test fails first: whoever changes a model below must update the
guards named in its entry, then the pinned shape.
"""

from __future__ import annotations

import re

import pytest
from pydantic import BaseModel

from engine.pipeline import PipelineResult
from engine.schemas import (
    CheckResult,
    DeterministicVerdict,
    ReasoningStep,
    ReasoningTrace,
    TracePolicy,
    VerificationResult,
)

GUARDS = {
    "DeterministicVerdict": "engine/judge/agent.py _verdict",
    "VerificationResult": "engine/judge/agent.py _verification, engine/auditor/built_models.py",
    "PipelineResult": "engine/pipeline.py _result",
    "TracePolicy": "engine/auditor/built_models.py",
    "ReasoningTrace": "engine/auditor/built_models.py and the trace-policy verifier",
    "CheckResult": "engine/schemas/trusted.py trusted_check callers",
    "ReasoningStep": "engine/schemas/trusted.py trusted_step callers",
}


def shape(cls: type[BaseModel]) -> dict[str, object]:
    """Fields (annotation and constraints), validators and config, without memory addresses."""
    decorators = cls.__pydantic_decorators__
    fields = {
        # a compiled validator (engine.schemas.utc) shows as a built-in function: the same name pinned
        name: re.sub(
            r" at 0x[0-9a-f]+|(?<=<)built-in (?=function )", "", f"{field.annotation} {field.metadata}"
        )
        for name, field in cls.model_fields.items()
    }
    return {
        "fields": fields,
        "field_validators": sorted(decorators.field_validators),
        "model_validators": sorted(decorators.model_validators),
        "config": {key: cls.model_config.get(key) for key in ("extra", "frozen", "strict")},
    }


PINNED: dict[str, dict[str, object]] = {
    "DeterministicVerdict": {
        "fields": {
            "schema_version": "<class 'str'> []",
            "market_id": "<class 'str'> [MinLen(min_length=1)]",
            "outcome": "<class 'str'> []",
            "confidence": "<class 'float'> [Ge(ge=0), Le(le=1)]",
            "resolution_time": "typing.Optional[typing.Annotated[datetime.datetime, "
            "AfterValidator(func=<function to_utc>)]] "
            "[]",
            "resolution_rule_id": "<class 'str'> [MinLen(min_length=1)]",
            "prompt_spec_hash": "str | None []",
            "evidence_root": "str | None []",
            "reasoning_root": "str | None []",
            "justification_hash": "str | None []",
            "selected_leaf_refs": "list[str] []",
            "metadata": "dict[str, typing.Any] []",
        },
        "field_validators": ["_not_blank"],
        "model_validators": [],
        "config": {"extra": "forbid", "frozen": None, "strict": None},
    },
    "VerificationResult": {
        "fields": {
            "ok": "<class 'bool'> []",
            "checks": "list[engine.schemas.verification.CheckResult] []",
            "challenge": "engine.schemas.verification.ChallengeRef | None []",
            "error": "engine.schemas.errors.CournotError | None []",
        },
        "field_validators": [],
        "model_validators": [],
        "config": {"extra": "forbid", "frozen": None, "strict": None},
    },
    "PipelineResult": {
        "fields": {
            "trace": "<class 'engine.schemas.trace.ReasoningTrace'> []",
            "audit_verification": "<class 'engine.schemas.verification.VerificationResult'> []",
            "verdict": "<class 'engine.schemas.verdict.DeterministicVerdict'> []",
            "judge_verification": "<class 'engine.schemas.verification.VerificationResult'> []",
            "roots": "<class 'engine.schemas.por.PoRRoots'> []",
            "step_hashes": "list[str] []",
            "evaluation_variables": "dict[str, typing.Any] | None []",
            "engine_version": "<class 'str'> []",
        },
        "field_validators": [],
        "model_validators": [],
        "config": {"extra": "forbid", "frozen": True, "strict": None},
    },
    "TracePolicy": {
        "fields": {
            "schema_version": "<class 'str'> []",
            "decoding_policy": "<class 'str'> []",
            "allow_external_sources": "<class 'bool'> []",
            "max_steps": "<class 'int'> [Ge(ge=1)]",
            "extra": "dict[str, typing.Any] []",
        },
        "field_validators": [],
        "model_validators": [],
        "config": {"extra": "forbid", "frozen": None, "strict": None},
    },
    "ReasoningTrace": {
        "fields": {
            "schema_version": "<class 'str'> []",
            "trace_id": "<class 'str'> [MinLen(min_length=1)]",
            "policy": "<class 'engine.schemas.trace.TracePolicy'> []",
            "steps": "list[engine.schemas.trace.ReasoningStep] []",
            "evidence_refs": "list[str] []",
        },
        "field_validators": ["_unique_refs"],
        "model_validators": ["_check_structure"],
        "config": {"extra": "forbid", "frozen": None, "strict": None},
    },
    "CheckResult": {
        "fields": {
            "check_id": "<class 'str'> [MinLen(min_length=1)]",
            "ok": "<class 'bool'> []",
            "severity": "typing.Literal['info', 'warn', 'error'] []",
            "message": "<class 'str'> []",
            "details": "dict[str, typing.Any] []",
        },
        "field_validators": [],
        "model_validators": [],
        "config": {"extra": "forbid", "frozen": None, "strict": None},
    },
    "ReasoningStep": {
        "fields": {
            "schema_version": "<class 'str'> []",
            "step_id": "<class 'str'> [MinLen(min_length=1)]",
            "type": "typing.Literal['search', 'extract', 'check', 'deduce', 'aggregate', 'map'] []",
            "inputs": "dict[str, typing.Any] []",
            "action": "<class 'str'> []",
            "output": "dict[str, typing.Any] []",
            "evidence_ids": "list[str] []",
            "prior_step_ids": "list[str] []",
            "hash_commitment": "str | None []",
        },
        "field_validators": [],
        "model_validators": [],
        "config": {"extra": "forbid", "frozen": None, "strict": None},
    },
}


@pytest.mark.parametrize(
    "cls",
    [
        DeterministicVerdict,
        VerificationResult,
        PipelineResult,
        TracePolicy,
        ReasoningTrace,
        CheckResult,
        ReasoningStep,
    ],
)
def test_pinned_shape(cls: type[BaseModel]) -> None:
    assert shape(cls) == PINNED[cls.__name__], f"update the guards in {GUARDS[cls.__name__]}"


if __name__ == "__main__":  # prints the current shapes, to pin after updating the guards
    import pprint

    for model in (DeterministicVerdict, VerificationResult, PipelineResult, TracePolicy, ReasoningTrace,
                  CheckResult, ReasoningStep):  # fmt: skip
        pprint.pprint({model.__name__: shape(model)}, width=110, sort_dicts=False)
