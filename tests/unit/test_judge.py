"""Module 07 (Judge): each test pins one promise of the module document or the project brief."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from engine.canonical import dumps_canonical
from engine.commitments import evidence_root, prompt_spec_hash, reasoning_root, verdict_hash
from engine.judge import (
    R_BINARY_DECISION,
    R_CONFIDENCE,
    R_CONFLICT,
    R_INVALID_FALLBACK,
    R_MULTI_CHOICE,
    R_VALIDITY,
    ConfidencePolicy,
    JudgeAgent,
    SchemaLock,
)
from engine.schemas import (
    DeterministicVerdict,
    EvidenceBundle,
    PromptSpec,
    ReasoningTrace,
    VerificationResult,
)
from engine.version import ENGINE_VERSION

MARKET: dict[str, Any] = {
    "market_id": "mk_judge",
    "question": "Will X trade above 100 on 2026-02-01?",
    "event_definition": "X price is above 100 at 2026-02-01T00:00:00Z",
    "resolution_deadline": "2026-02-02T00:00:00Z",
    "resolution_window": {"start": "2026-01-31T00:00:00Z", "end": "2026-02-01T00:00:00Z"},
    "resolution_rules": {"rules": [{"rule_id": "R_BINARY_DECISION", "description": "d"}]},
    "dispute_policy": {"dispute_window_seconds": 3600},
}
SPEC: dict[str, Any] = {
    "market": MARKET,
    "prediction_semantics": {"target_entity": "X", "predicate": "price above", "threshold": "100"},
    "extra": {"strict_mode": True},
}
BASE_VARIABLES: dict[str, Any] = {
    "event_observed": True,
    "numeric_value": 101.5,
    "source_summary": ["ev_b", "ev_a", "ev_b"],
    "conflict_detected": False,
    "insufficient_evidence": False,
    "threshold": 100,
    "comparator": ">",
}


def make_spec(**changes: Any) -> PromptSpec:
    doc = copy.deepcopy(SPEC)
    market = changes.pop("market", {})
    doc["market"].update(market)
    extra = changes.pop("extra", {})
    doc["extra"].update(extra)
    doc.update(changes)
    return PromptSpec.model_validate(doc)


def make_evidence(market_id: str = "mk_judge", ids: tuple[str, ...] = ("ev_a", "ev_b")) -> EvidenceBundle:
    items = [
        {
            "evidence_id": evidence_id,
            "requirement_id": "req_1",
            "provenance": {"source_id": f"src_{n}", "source_uri": f"https://example.test/{n}", "tier": 2},
            "extracted_fields": {"price_usd": 101.5},
        }
        for n, evidence_id in enumerate(ids)
    ]
    return EvidenceBundle.model_validate(
        {"bundle_id": "b_1", "market_id": market_id, "plan_id": "p_1", "items": items}
    )


def make_trace(
    variables: dict[str, Any] | None = None, *, final: str = "map", **overrides: Any
) -> ReasoningTrace:
    values = {**BASE_VARIABLES, **overrides} if variables is None else variables
    steps: list[dict[str, Any]] = [
        {"step_id": "step_0001", "type": "extract", "action": "extract", "evidence_ids": ["ev_a"]},
        {"step_id": "step_0002", "type": "extract", "action": "extract", "evidence_ids": ["ev_b"]},
        {"step_id": "step_0003", "type": "aggregate", "action": "aggregate", "prior_step_ids": ["step_0001"]},
    ]
    if final:
        output = {"evaluation_variables": {k: v for k, v in values.items() if v is not None}}
        steps.append({"step_id": "step_0004", "type": final, "action": final, "output": output})
    return ReasoningTrace.model_validate({"trace_id": "trace_judge", "steps": steps})


def judge(
    spec: PromptSpec | None = None,
    evidence: EvidenceBundle | None = None,
    trace: ReasoningTrace | None = None,
) -> tuple[DeterministicVerdict, VerificationResult]:
    return JudgeAgent().judge(spec or make_spec(), evidence or make_evidence(), trace or make_trace())


def check(result: VerificationResult, check_id: str) -> Any:
    matches = [c for c in result.checks if c.check_id == check_id]
    assert len(matches) == 1, [c.check_id for c in result.checks]
    return matches[0]


def trail(verdict: DeterministicVerdict) -> list[tuple[str, str]]:
    return [(entry["rule_id"], entry["status"]) for entry in verdict.metadata["rule_trail"]]


# -- 10.1 mapping ---------------------------------------------------------------------------------


def test_event_observed_true_maps_to_yes_with_default_confidence() -> None:
    verdict, result = judge()
    assert (verdict.outcome, verdict.confidence, verdict.resolution_rule_id) == (
        "YES",
        0.7,
        R_BINARY_DECISION,
    )
    assert verdict.confidence >= ConfidencePolicy().min_confidence_for_yesno
    assert result.ok and result.challenge is None
    assert trail(verdict) == [
        (R_VALIDITY, "pass"),
        (R_CONFLICT, "pass"),
        (R_BINARY_DECISION, "pass"),
        (R_CONFIDENCE, "pass"),
    ]


def test_event_observed_false_maps_to_no() -> None:
    verdict, result = judge(trace=make_trace(event_observed=False, numeric_value=99, comparator=">"))
    assert (verdict.outcome, verdict.resolution_rule_id) == ("NO", R_BINARY_DECISION)
    assert result.ok


@pytest.mark.parametrize(
    ("value", "comparator", "threshold", "outcome"),
    [
        (100.5, ">", 100, "YES"),
        (100, ">", 100, "NO"),
        (100, ">=", 100, "YES"),
        (99.99, ">=", 100, "NO"),
        (99, "<", 100, "YES"),
        (100, "<", 100, "NO"),
        (100, "<=", 100.0, "YES"),
        (100.01, "<=", 100, "NO"),
        (100.0, "==", 100, "YES"),
        (100.001, "==", 100, "NO"),
    ],
)
def test_threshold_comparator_from_evaluation_variables_decides_when_event_observed_absent(
    value: float, comparator: str, threshold: float, outcome: str
) -> None:
    trace = make_trace(event_observed=None, numeric_value=value, comparator=comparator, threshold=threshold)
    verdict, _ = judge(trace=trace)
    assert (verdict.outcome, verdict.resolution_rule_id) == (outcome, R_BINARY_DECISION)
    assert (
        "comparison"
        in check(JudgeAgent().judge(make_spec(), make_evidence(), trace)[1], "binary_decision").message
    )


def test_event_observed_contradicting_the_comparison_is_invalid_via_validity() -> None:
    verdict, result = judge(
        trace=make_trace(event_observed=True, numeric_value=99, comparator=">", threshold=100)
    )
    assert (verdict.outcome, verdict.resolution_rule_id, verdict.confidence) == ("INVALID", R_VALIDITY, 0.0)
    assert result.challenge is not None and result.challenge.kind == "reasoning_leaf"
    assert (result.challenge.step_id, result.challenge.leaf_index) == ("step_0004", 3)


def test_unknown_event_without_comparison_is_invalid_via_fallback() -> None:
    trace = make_trace(event_observed=None, numeric_value=None, comparator=None, threshold=None)
    verdict, result = judge(trace=trace)
    assert (verdict.outcome, verdict.resolution_rule_id) == ("INVALID", R_INVALID_FALLBACK)
    assert verdict.confidence == 0.3 and not result.ok
    assert trail(verdict)[-2:] == [(R_INVALID_FALLBACK, "applied"), (R_CONFIDENCE, "pass")]


def test_insufficient_evidence_is_invalid_via_fallback_with_low_confidence() -> None:
    verdict, result = judge(trace=make_trace(insufficient_evidence=True))
    assert (verdict.outcome, verdict.resolution_rule_id, verdict.confidence) == (
        "INVALID",
        R_INVALID_FALLBACK,
        0.3,
    )
    assert not check(result, "validity").ok
    assert result.challenge is not None and result.challenge.kind == "evidence_leaf"


def test_empty_source_summary_counts_as_insufficient() -> None:
    verdict, _ = judge(trace=make_trace(source_summary=[]))
    assert (verdict.outcome, verdict.resolution_rule_id) == ("INVALID", R_INVALID_FALLBACK)


def test_conflict_multiplies_confidence_by_0_8_and_records_r_conflict() -> None:
    verdict, result = judge(trace=make_trace(conflict_detected=True))
    assert 0.7 * 0.8 != 0.56  # the float product is 0.5599999999999999; rounding makes it exact
    assert (verdict.outcome, verdict.confidence, verdict.resolution_rule_id) == (
        "YES",
        0.56,
        R_BINARY_DECISION,
    )
    assert (R_CONFLICT, "applied") in trail(verdict)
    conflict = check(result, "conflict")
    assert conflict.ok and conflict.severity == "warn"
    assert verdict.metadata["confidence_factors"] == ["conflict"]


def test_conflict_with_policy_invalid_is_invalid_via_r_conflict() -> None:
    spec = make_spec(extra={"confidence_policy": {"conflict_action": "invalid"}})
    verdict, result = judge(spec=spec, trace=make_trace(conflict_detected=True))
    assert (verdict.outcome, verdict.resolution_rule_id, verdict.confidence) == ("INVALID", R_CONFLICT, 0.3)
    assert result.challenge is not None and result.challenge.kind == "evidence_leaf"


def test_conflict_and_fallback_drop_below_the_floor_and_become_invalid_via_r_confidence() -> None:
    verdict, result = judge(trace=make_trace(conflict_detected=True, fallback_used=True))
    assert (verdict.outcome, verdict.resolution_rule_id, verdict.confidence) == (
        "INVALID",
        R_CONFIDENCE,
        0.504,
    )
    assert not check(result, "confidence").ok
    assert verdict.metadata["confidence_factors"] == ["conflict", "fallback"]


def test_fallback_flag_inside_selection_counts() -> None:
    verdict, _ = judge(trace=make_trace(selection={"strategy": "fallback_chain", "fallback_used": True}))
    assert verdict.confidence == 0.63


def test_missing_confidence_policy_uses_documented_defaults() -> None:
    verdict, _ = judge()
    assert verdict.metadata["confidence_policy"] == {
        "conflict_action": "reduce",
        "conflict_multiplier": 0.8,
        "default_confidence": 0.7,
        "fallback_multiplier": 0.9,
        "invalid_confidence": 0.3,
        "min_confidence_for_yesno": 0.55,
    }


@pytest.mark.parametrize(
    ("policy", "variables", "expected"),
    [
        ({"default_confidence": 0.9}, {}, ("YES", 0.9, R_BINARY_DECISION)),
        ({"default_confidence": 1}, {}, ("YES", 1.0, R_BINARY_DECISION)),
        ({"conflict_multiplier": 0.5}, {"conflict_detected": True}, ("INVALID", 0.35, R_CONFIDENCE)),
        (
            {"min_confidence_for_yesno": 0.3, "conflict_multiplier": 0.5},
            {"conflict_detected": True},
            ("YES", 0.35, R_BINARY_DECISION),
        ),
        ({"min_confidence_for_yesno": 0.75}, {}, ("INVALID", 0.7, R_CONFIDENCE)),
        ({"invalid_confidence": 0.9}, {"insufficient_evidence": True}, ("INVALID", 0.55, R_INVALID_FALLBACK)),
        ({"invalid_confidence": 0.0}, {"insufficient_evidence": True}, ("INVALID", 0.0, R_INVALID_FALLBACK)),
        ({"unknown_key": "ignored"}, {}, ("YES", 0.7, R_BINARY_DECISION)),
    ],
)
def test_confidence_policy_overrides_from_extra(
    policy: dict[str, Any], variables: dict[str, Any], expected: tuple[str, float, str]
) -> None:
    verdict, _ = judge(spec=make_spec(extra={"confidence_policy": policy}), trace=make_trace(**variables))
    assert (verdict.outcome, verdict.confidence, verdict.resolution_rule_id) == expected


@pytest.mark.parametrize(
    "policy",
    ["high", {"default_confidence": "0.7"}, {"default_confidence": True}, {"min_confidence_for_yesno": 1.5},
     {"conflict_action": "ignore"}],
)  # fmt: skip
def test_malformed_confidence_policy_fails_schema_lock(policy: Any) -> None:
    verdict, result = judge(spec=make_spec(extra={"confidence_policy": policy}))
    assert (verdict.outcome, verdict.resolution_rule_id, verdict.confidence) == ("INVALID", R_VALIDITY, 0.0)
    assert not check(result, "schema_lock.confidence_policy").ok


# -- 10.2 schema lock ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "failed_check"),
    [
        ({"output_schema_ref": "core.schemas.verdict.Other"}, "schema_lock.output_schema_ref"),
        ({"extra": {"strict_mode": False}}, "schema_lock.strict_mode"),
        ({"extra": {"strict_mode": "true"}}, "schema_lock.strict_mode"),
        ({"created_at": "2026-01-01T00:00:00Z"}, "schema_lock.created_at"),
    ],
)
def test_schema_lock_failure_makes_the_verdict_invalid_via_r_validity(
    changes: dict[str, Any], failed_check: str
) -> None:
    verdict, result = judge(spec=make_spec(**changes))
    assert (verdict.outcome, verdict.resolution_rule_id, verdict.confidence) == ("INVALID", R_VALIDITY, 0.0)
    assert not check(result, failed_check).ok and not result.ok
    assert result.challenge is not None and result.challenge.kind == "por_bundle"
    assert trail(verdict) == [(R_VALIDITY, "fail"), (R_CONFIDENCE, "pass")]


def test_missing_strict_mode_fails_schema_lock() -> None:
    doc = copy.deepcopy(SPEC)
    doc["extra"] = {}
    assert not check(
        VerificationResult(ok=False, checks=SchemaLock.verify_prompt_spec(PromptSpec.model_validate(doc))),
        "schema_lock.strict_mode",
    ).ok


def test_missing_evaluation_variables_is_invalid_with_reasoning_leaf_challenge() -> None:
    verdict, result = judge(trace=make_trace(final=""))
    assert (verdict.outcome, verdict.resolution_rule_id) == ("INVALID", R_VALIDITY)
    assert not check(result, "schema_lock.evaluation_variables").ok
    assert result.challenge is not None and result.challenge.kind == "reasoning_leaf"
    assert (result.challenge.step_id, result.challenge.leaf_index) == ("step_0003", 2)
    assert "evaluation_step_id" not in verdict.metadata


def test_evidence_for_another_market_fails_schema_lock() -> None:
    verdict, result = judge(evidence=make_evidence(market_id="mk_other"))
    assert (verdict.outcome, verdict.resolution_rule_id) == ("INVALID", R_VALIDITY)
    assert not check(result, "schema_lock.market_id").ok


@pytest.mark.parametrize(
    "variables",
    [
        {"source_summary": "ev_a", "conflict_detected": False, "insufficient_evidence": False},
        {"source_summary": ["ev_a"], "insufficient_evidence": False},
        {"source_summary": ["ev_a"], "conflict_detected": 0, "insufficient_evidence": False},
        {**BASE_VARIABLES, "comparator": "gt"},
        {**BASE_VARIABLES, "numeric_value": "101.5"},
        {**BASE_VARIABLES, "event_observed": "yes"},
    ],
)
def test_malformed_evaluation_variables_are_invalid_via_r_validity(variables: dict[str, Any]) -> None:
    verdict, result = judge(trace=make_trace(variables))
    assert (verdict.outcome, verdict.resolution_rule_id, verdict.confidence) == ("INVALID", R_VALIDITY, 0.0)
    assert check(result, "validity").details["problems"]


def test_ungrounded_source_summary_is_invalid_via_r_validity() -> None:
    verdict, result = judge(trace=make_trace(source_summary=["ev_a", "ev_missing"]))
    assert (verdict.outcome, verdict.resolution_rule_id) == ("INVALID", R_VALIDITY)
    assert check(result, "validity").details["unknown"] == ["ev_missing"]


def test_step_citing_unknown_evidence_is_pinpointed() -> None:
    verdict, result = judge(
        evidence=make_evidence(ids=("ev_b", "ev_c")), trace=make_trace(source_summary=["ev_b"])
    )
    assert (verdict.outcome, verdict.resolution_rule_id) == ("INVALID", R_VALIDITY)
    assert result.challenge is not None
    assert (result.challenge.kind, result.challenge.leaf_index, result.challenge.step_id) == (
        "reasoning_leaf",
        0,
        "step_0001",
    )


def test_aggregate_step_is_the_fallback_and_the_last_map_step_is_preferred() -> None:
    verdict, _ = judge(trace=make_trace(final="aggregate"))
    assert verdict.outcome == "YES" and verdict.metadata["evaluation_step_id"] == "step_0004"
    doc = make_trace().model_dump(mode="json")
    doc["steps"][2]["output"] = {"evaluation_variables": {**BASE_VARIABLES, "event_observed": False}}
    doc["steps"].append({"step_id": "step_0005", "type": "aggregate", "action": "late aggregate",
                         "output": {"evaluation_variables": {**BASE_VARIABLES, "event_observed": False}}})  # fmt: skip
    verdict, _ = judge(trace=ReasoningTrace.model_validate(doc))
    assert verdict.outcome == "YES" and verdict.metadata["evaluation_step_id"] == "step_0004"


# -- multi_choice ------------------------------------------------------------------------------------


def multi_spec() -> PromptSpec:
    return make_spec(market={"market_type": "multi_choice", "possible_outcomes": ["RED", "GREEN", "BLUE"]})


def test_multi_choice_takes_the_observed_outcome() -> None:
    trace = make_trace(event_observed=None, comparator=None, observed_outcome="GREEN")
    verdict, result = judge(spec=multi_spec(), trace=trace)
    assert (verdict.outcome, verdict.resolution_rule_id, verdict.confidence) == ("GREEN", R_MULTI_CHOICE, 0.7)
    assert result.ok and check(result, "schema_lock.outcome").ok


@pytest.mark.parametrize("observed", [None, "PURPLE", "INVALID", "green"])
def test_multi_choice_without_a_listed_outcome_is_invalid(observed: str | None) -> None:
    trace = make_trace(event_observed=None, comparator=None, observed_outcome=observed)
    verdict, result = judge(spec=multi_spec(), trace=trace)
    assert (verdict.outcome, verdict.resolution_rule_id) == ("INVALID", R_INVALID_FALLBACK)
    assert not check(result, "multi_choice_decision").ok


# -- verdict fields and reproducibility -------------------------------------------------------------


def test_verdict_references_are_the_real_por_commitments() -> None:
    spec, evidence, trace = make_spec(), make_evidence(), make_trace()
    verdict, _ = JudgeAgent().judge(spec, evidence, trace)
    assert verdict.prompt_spec_hash == prompt_spec_hash(spec)
    assert verdict.evidence_root == evidence_root(evidence)[0]
    assert verdict.reasoning_root == reasoning_root(trace)[0]
    assert verdict.resolution_time is None and verdict.justification_hash is None
    assert verdict.market_id == "mk_judge"


def test_selected_leaf_refs_are_first_seen_order_and_metadata_is_deterministic() -> None:
    verdict, _ = judge()
    assert verdict.selected_leaf_refs == ["ev_b", "ev_a"]
    meta = verdict.metadata
    assert (meta["trace_id"], meta["step_count"], meta["engine_version"]) == (
        "trace_judge",
        4,
        ENGINE_VERSION,
    )
    assert (meta["evidence_leaf_count"], meta["reasoning_leaf_count"], meta["bundle_id"]) == (2, 4, "b_1")
    assert meta["strict_mode"] is True and meta["trace_policy"]["max_steps"] == 200


def test_selected_leaf_refs_fall_back_to_step_evidence_when_variables_are_unreadable() -> None:
    verdict, _ = judge(trace=make_trace({"source_summary": 3}))
    assert verdict.selected_leaf_refs == ["ev_a", "ev_b"]


def test_verdict_hash_is_reproducible_in_process() -> None:
    first, _ = judge()
    second, _ = judge()
    assert dumps_canonical(first) == dumps_canonical(second)
    assert verdict_hash(first) == verdict_hash(second)


SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from tests.unit.test_judge import judge
from engine.canonical import dumps_canonical
from engine.commitments import verdict_hash
verdict, result = judge()
print(json.dumps({"verdict": dumps_canonical(verdict), "hash": verdict_hash(verdict),
                  "result": dumps_canonical(result)}))
"""


def test_verdict_hash_is_identical_across_hash_seeds_time_zones_and_locales() -> None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    outputs = set()
    for seed, tz, lang in [
        ("0", "UTC", "C"),
        ("1", "Asia/Kathmandu", "de_DE.UTF-8"),
        ("987", "America/St_Johns", "tr_TR.UTF-8"),
    ]:
        env = {**os.environ, "PYTHONHASHSEED": seed, "TZ": tz, "LANG": lang, "LC_ALL": lang}
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, root], env=env, capture_output=True, text=True, check=True
        )
        outputs.add(done.stdout)
    assert len(outputs) == 1
    assert json.loads(outputs.pop())["hash"] == verdict_hash(judge()[0])
