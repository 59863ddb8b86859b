"""Module 06 §9: numeric and boolean contradictions as structured CheckResults."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.auditor import AuditorAgent, ContradictionChecker
from engine.auditor.reasoning.claim_extraction import Claim, make_claim_id
from engine.auditor.reasoning.contradiction_checks import relative_spread
from engine.schemas import EvidenceBundle, PromptSpec
from tests.golden.regenerate import CORPUS_DIR


def claim(evidence_id: str, value: Any, key: str = "price_usd", kind: str = "numeric") -> Claim:
    path = f"extracted_fields.{key}"
    return Claim(make_claim_id(evidence_id, path, value), kind, key, path, value, evidence_id, "req", 0.8, 0)


def conflicts(results: list[Any]) -> list[Any]:
    return [result for result in results if result.check_id != "contradiction.scan"]


def test_numeric_conflict_beyond_tolerance_is_a_failed_check_naming_claims_sources_and_values() -> None:
    claims = [claim("ev_a", 101200.0), claim("ev_b", 98900.0)]
    results = ContradictionChecker(relative_tolerance=0.01).check(claims)
    assert results[0].check_id == "contradiction.scan" and results[0].details["conflicts"] == 1
    [result] = conflicts(results)
    assert result.check_id == "contradiction.numeric:price_usd"
    assert (result.ok, result.severity) == (False, "error")
    details = result.details
    assert details["claim_ids"] == [claims[0].claim_id, claims[1].claim_id]
    assert details["evidence_ids"] == ["ev_a", "ev_b"]
    assert details["values"] == [101200.0, 98900.0]
    assert (details["low"], details["high"]) == (98900.0, 101200.0)
    assert details["relative_spread"] == pytest.approx(2300 / 101200)
    assert details["tolerance"] == 0.01


def test_numeric_values_within_tolerance_do_not_conflict() -> None:
    results = ContradictionChecker(relative_tolerance=0.01).check(
        [claim("ev_a", 104250.12), claim("ev_b", 104198.5)]
    )
    assert conflicts(results) == []
    assert results[0].ok and results[0].details["numeric_groups"] == 1


def test_tolerance_is_configurable() -> None:
    claims = [claim("ev_a", 100.0), claim("ev_b", 104.0)]
    assert conflicts(ContradictionChecker(relative_tolerance=0.05).check(claims)) == []
    assert len(conflicts(ContradictionChecker(relative_tolerance=0.03).check(claims))) == 1
    with pytest.raises(ValueError):
        ContradictionChecker(relative_tolerance=1.5)


def test_boolean_conflict_is_a_failed_check() -> None:
    claims = [claim("ev_sec", False, "approved", "boolean"), claim("ev_block", True, "approved", "boolean")]
    [result] = conflicts(ContradictionChecker().check(claims))
    assert result.check_id == "contradiction.boolean:approved"
    assert (result.ok, result.severity) == (False, "error")
    assert result.details["values"] == [False, True]
    assert result.details["evidence_ids"] == ["ev_sec", "ev_block"]


def test_agreeing_booleans_and_single_sources_do_not_conflict() -> None:
    claims = [claim("ev_a", True, "approved", "boolean"), claim("ev_b", True, "approved", "boolean")]
    claims.append(claim("ev_a", 5.0, "volume"))  # one source only: nothing to compare
    results = ContradictionChecker().check(claims)
    assert conflicts(results) == []
    assert results[0].details["boolean_groups"] == 1 and results[0].details["numeric_groups"] == 0


def test_non_decisive_keys_and_outcome_agreement_downgrade_to_warnings() -> None:
    claims = [
        claim("ev_a", 120000.0),
        claim("ev_b", 104000.0),
        claim("ev_a", 1.0, "volume"),
        claim("ev_b", 9.0, "volume"),
    ]
    results = conflicts(
        ContradictionChecker().check(claims, decisive_keys={"price_usd"}, agrees=lambda group: True)
    )
    assert [(r.check_id, r.ok, r.severity) for r in results] == [
        ("contradiction.numeric:price_usd", True, "warn"),
        ("contradiction.numeric:volume", True, "warn"),
    ]
    assert results[0].details["decisive"] is True and results[0].details["outcome_agrees"] is True
    assert results[1].details["decisive"] is False


def test_huge_ints_and_tiny_floats_are_compared_exactly() -> None:
    assert relative_spread(10**400, 10**400 + 1) > 0
    assert float(relative_spread(-1.7976931348623157e308, 1.7976931348623157e308)) == 2.0
    assert float(relative_spread(1.229e-300, 1.234e-300)) == pytest.approx(0.005 / 1.234, rel=1e-9)
    assert relative_spread(0, 0) == 0
    results = ContradictionChecker().check([claim("ev_a", 10**400), claim("ev_b", 2 * 10**400)])
    assert conflicts(results)[0].details["relative_spread"] == 0.5


def test_audit_reports_conflicting_corpus_sources_and_sets_conflict_detected() -> None:
    document = json.loads((CORPUS_DIR / "03_conflicting_sources.json").read_text(encoding="utf-8"))
    trace, verification = AuditorAgent().audit(
        PromptSpec.model_validate(document["prompt_spec"]),
        EvidenceBundle.model_validate(document["evidence_bundle"]),
    )
    failed = [check for check in verification.checks if not check.ok]
    assert [check.check_id for check in failed] == ["contradiction.numeric:price_usd"]
    assert failed[0].details["outcome_agrees"] is False  # 101200 is above 100k, 98900 is not
    contradiction_step = next(step for step in trace.steps if step.action == "check_contradictions")
    assert contradiction_step.output["conflict_detected"] is True
    assert trace.steps[-1].output["evaluation_variables"]["conflict_detected"] is True


def test_tolerance_override_from_audit_policy_is_recorded_in_the_trace_policy() -> None:
    document = json.loads((CORPUS_DIR / "03_conflicting_sources.json").read_text(encoding="utf-8"))
    document["prompt_spec"]["extra"]["audit_policy"] = {"numeric_tolerance": 0.05}
    trace, verification = AuditorAgent().audit(
        PromptSpec.model_validate(document["prompt_spec"]),
        EvidenceBundle.model_validate(document["evidence_bundle"]),
    )
    assert trace.policy.extra["numeric_tolerance"] == 0.05
    assert not any(check.check_id.startswith("contradiction.numeric:") for check in verification.checks)
