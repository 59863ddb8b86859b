"""The audit's policy, trace and verification models built directly equal ``trusted`` and validation."""

from __future__ import annotations

from typing import Any

from engine.auditor import AuditorAgent
from engine.auditor.built_models import _layout_holds, policy_model, trace_model, verification_model
from engine.schemas import (
    ChallengeRef,
    CheckResult,
    CournotError,
    ReasoningStep,
    ReasoningTrace,
    TracePolicy,
    VerificationResult,
)
from engine.schemas.trusted import trusted


def _same(built: Any, reference: Any) -> None:
    assert type(built) is type(reference)
    assert list(built.__dict__.items()) == list(reference.__dict__.items())
    assert built.model_fields_set == reference.model_fields_set
    assert built.__pydantic_extra__ is None and built.__pydantic_private__ is None
    assert built == reference
    assert built.model_dump_json() == reference.model_dump_json()


def test_the_models_declare_the_layout_built_directly() -> None:
    assert _layout_holds()


def test_policy_model_equals_trusted_and_validated_construction() -> None:
    extra = {"auditor": "a", "numeric_tolerance": 0, "engine_version": "x"}
    for max_steps in (8, 200):
        built = policy_model(max_steps, dict(extra))
        values = {"decoding_policy": "strict", "allow_external_sources": False, "max_steps": max_steps}
        _same(built, trusted(TracePolicy, **values, extra=dict(extra)))
        _same(built, TracePolicy(**values, extra=dict(extra)))


def test_trace_and_verification_models_equal_trusted_and_validated_construction() -> None:
    policy = policy_model(9, {})
    step = ReasoningStep(step_id="step_0001", type="map", action="a", evidence_ids=["e1"])
    _same(
        trace_model("trace_x", policy, [step], ["e1"]),
        trusted(ReasoningTrace, trace_id="trace_x", policy=policy, steps=[step], evidence_refs=["e1"]),
    )
    _same(
        trace_model("trace_x", policy, [step], ["e1"]),
        ReasoningTrace(trace_id="trace_x", policy=policy, steps=[step], evidence_refs=["e1"]),
    )
    check = CheckResult(check_id="c", ok=False, severity="error", message="m")
    challenge = ChallengeRef(kind="reasoning_leaf", leaf_index=0)
    error = CournotError(code="c", message="m")
    for ok, checks, chal, err in ((True, [], None, None), (False, [check], challenge, error)):
        built = verification_model(ok, list(checks), chal, err)
        _same(built, trusted(VerificationResult, ok=ok, checks=list(checks), challenge=chal, error=err))
        _same(built, VerificationResult(ok=ok, checks=list(checks), challenge=chal, error=err))


def test_an_audit_result_round_trips_through_validation() -> None:
    from tests.unit.test_auditor_field_reads import _corpus

    agent = AuditorAgent()
    for spec, bundle in _corpus()[:10]:
        trace, verification = agent.audit(spec, bundle)
        assert TracePolicy.model_validate(trace.policy.model_dump()) == trace.policy
        assert ReasoningTrace.model_validate(trace.model_dump()) == trace
        assert VerificationResult.model_validate(verification.model_dump()) == verification
