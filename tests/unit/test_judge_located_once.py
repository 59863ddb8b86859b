"""The judge reads the confidence policy and locates the evaluation variables once per judgement:
the same checks as the public SchemaLock methods, and the located step for the pipeline."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from engine.judge import JudgeAgent, SchemaLock
from tests.unit.test_judge import make_evidence, make_spec, make_trace


@pytest.mark.parametrize(
    ("spec_changes", "trace"),
    [
        ({}, None),
        ({"extra": {"strict_mode": False}}, None),  # the schema lock stops the rules before validity
        ({"extra": {"confidence_policy": {"default_confidence": 2}}}, None),
        ({}, "no variables"),
        ({}, "aggregate"),
    ],
)
def test_the_judge_reads_the_policy_and_locates_the_variables_once_with_the_same_checks(
    spec_changes: dict[str, Any], trace: str | None
) -> None:
    """The rules read the confidence policy and locate the variables once for the schema lock and
    the later stages: the checks equal the public SchemaLock methods', and ``judge_located`` gives
    ``judge``'s answer plus ``locate_evaluation_variables(trace)`` whatever stage decided."""
    from engine.judge import locate_evaluation_variables

    spec = make_spec(**copy.deepcopy(spec_changes))
    steps = {
        None: make_trace(),
        "no variables": make_trace(final=""),
        "aggregate": make_trace(final="aggregate"),
    }
    built = steps[trace]
    evidence = make_evidence()
    verdict, result, located = JudgeAgent().judge_located(spec, evidence, built)
    assert (verdict, result) == JudgeAgent().judge(spec, evidence, built)
    assert located == locate_evaluation_variables(built)
    lock = [
        *SchemaLock.verify_prompt_spec(spec),
        *SchemaLock.verify_evidence(spec, evidence),
        *SchemaLock.verify_trace(built),
    ]
    assert result.checks[: len(lock)] == lock
