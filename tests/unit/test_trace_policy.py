"""Module 06 §11: the trace-policy verifier, on traces that bypass the model validators."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.auditor import AuditorAgent, TracePolicyVerifier
from engine.commitments import step_hash
from engine.schemas import EvidenceBundle, PromptSpec, ReasoningStep, ReasoningTrace, TracePolicy
from tests.golden.regenerate import CORPUS_DIR


@pytest.fixture(scope="module")
def audited() -> tuple[PromptSpec, EvidenceBundle, ReasoningTrace]:
    document = json.loads((CORPUS_DIR / "18_quorum_met.json").read_text(encoding="utf-8"))
    spec = PromptSpec.model_validate(document["prompt_spec"])
    bundle = EvidenceBundle.model_validate(document["evidence_bundle"])
    trace, _ = AuditorAgent().audit(spec, bundle)
    return spec, bundle, trace


def rebuilt(trace: ReasoningTrace, steps: list[Any], **fields: Any) -> ReasoningTrace:
    """A trace made with model_construct, so the model's own structure validator never runs."""
    values = {
        "trace_id": trace.trace_id,
        "policy": trace.policy,
        "steps": steps,
        "evidence_refs": trace.evidence_refs,
    }
    values.update(fields)
    return ReasoningTrace.model_construct(**values)


def changed(step: ReasoningStep, **update: Any) -> ReasoningStep:
    return step.model_copy(update=update)


def verify(spec: PromptSpec, bundle: EvidenceBundle, trace: ReasoningTrace) -> Any:
    return TracePolicyVerifier().verify(trace, spec, bundle)


def failed_ids(result: Any) -> list[str]:
    return [check.check_id for check in result.checks if not check.ok]


def test_the_auditors_own_trace_passes_every_rule(
    audited: tuple[PromptSpec, EvidenceBundle, ReasoningTrace],
) -> None:
    spec, bundle, trace = audited
    result = verify(spec, bundle, trace)
    assert result.ok and result.challenge is None and result.error is None
    [check] = result.checks
    assert check.check_id == "trace.policy"
    assert "trace.final_evaluation_variables" in check.details["rules"]


def test_unknown_evidence_id_fails_with_a_reasoning_leaf_challenge(
    audited: tuple[PromptSpec, EvidenceBundle, ReasoningTrace],
) -> None:
    spec, bundle, trace = audited
    steps = list(trace.steps)
    steps[2] = changed(steps[2], evidence_ids=[*steps[2].evidence_ids, "ev_0000000000000000"])
    result = verify(spec, bundle, rebuilt(trace, steps))
    assert not result.ok
    assert failed_ids(result) == ["trace.evidence_refs"]
    challenge = result.challenge
    assert challenge is not None
    assert (challenge.kind, challenge.step_id, challenge.leaf_index) == (
        "reasoning_leaf",
        steps[2].step_id,
        2,
    )
    assert challenge.evidence_id == "ev_0000000000000000"
    assert result.error is not None and result.error.code == "trace_policy_violation"


def test_prior_step_ids_must_name_earlier_steps(
    audited: tuple[PromptSpec, EvidenceBundle, ReasoningTrace],
) -> None:
    spec, bundle, trace = audited
    steps = list(trace.steps)
    steps[1] = changed(steps[1], prior_step_ids=[steps[4].step_id])  # a forward reference
    with pytest.raises(ValueError):
        ReasoningTrace(trace_id=trace.trace_id, policy=trace.policy, steps=steps)  # the model refuses it...
    result = verify(spec, bundle, rebuilt(trace, steps))  # ...and so does the verifier, without the model
    assert failed_ids(result) == ["trace.prior_steps"]
    assert result.challenge is not None and result.challenge.step_id == steps[1].step_id


def test_missing_final_evaluation_variables_fails(
    audited: tuple[PromptSpec, EvidenceBundle, ReasoningTrace],
) -> None:
    spec, bundle, trace = audited
    steps = list(trace.steps)
    steps[-1] = changed(steps[-1], output={"note": "no variables"})
    result = verify(spec, bundle, rebuilt(trace, steps))
    assert failed_ids(result) == ["trace.final_evaluation_variables"]
    assert result.challenge is not None and result.challenge.step_id == steps[-1].step_id
    # a final step of another type fails as well, even with variables
    steps[-1] = changed(trace.steps[-1], type="deduce")
    assert failed_ids(verify(spec, bundle, rebuilt(trace, steps))) == ["trace.final_evaluation_variables"]


def test_badly_typed_evaluation_variables_fail(
    audited: tuple[PromptSpec, EvidenceBundle, ReasoningTrace],
) -> None:
    spec, bundle, trace = audited
    variables = dict(trace.steps[-1].output["evaluation_variables"])
    variables.update(conflict_detected="yes", numeric_value="100", source_summary=["ev_unknown"])
    del variables["insufficient_evidence"]
    steps = [*trace.steps[:-1], changed(trace.steps[-1], output={"evaluation_variables": variables})]
    result = verify(spec, bundle, rebuilt(trace, steps))
    [check] = [c for c in result.checks if not c.ok]
    for fragment in (
        "insufficient_evidence is missing",
        "conflict_detected must be a bool",
        "numeric_value",
        "ev_unknown",
    ):
        assert fragment in check.message


def test_duplicate_and_non_monotonic_step_ids_fail(
    audited: tuple[PromptSpec, EvidenceBundle, ReasoningTrace],
) -> None:
    spec, bundle, trace = audited
    steps = list(trace.steps)
    steps[3] = changed(steps[3], step_id=steps[2].step_id)
    assert "trace.step_ids" in failed_ids(verify(spec, bundle, rebuilt(trace, steps)))
    steps = list(trace.steps)
    steps[1], steps[2] = changed(steps[1], step_id="step_0003"), changed(steps[2], step_id="step_0002")
    result = verify(spec, bundle, rebuilt(trace, steps))
    assert "trace.step_ids" in failed_ids(result)
    steps = [changed(trace.steps[0], step_id="s1"), *trace.steps[1:]]
    assert "trace.step_ids" in failed_ids(verify(spec, bundle, rebuilt(trace, steps)))


def test_step_count_is_bounded_by_the_policy(
    audited: tuple[PromptSpec, EvidenceBundle, ReasoningTrace],
) -> None:
    spec, bundle, trace = audited
    tight = TracePolicy(max_steps=len(trace.steps) - 1)
    result = verify(spec, bundle, rebuilt(trace, list(trace.steps), policy=tight))
    assert failed_ids(result) == ["trace.step_count"]
    assert result.challenge is not None and result.challenge.leaf_index == len(trace.steps) - 1
    capped = TracePolicyVerifier(max_steps=3).verify(trace, spec, bundle)
    assert failed_ids(capped) == ["trace.step_count"]


def test_every_step_must_cite_evidence(audited: tuple[PromptSpec, EvidenceBundle, ReasoningTrace]) -> None:
    spec, bundle, trace = audited
    steps = [*trace.steps[:2], changed(trace.steps[2], evidence_ids=[]), *trace.steps[3:]]
    assert failed_ids(verify(spec, bundle, rebuilt(trace, steps))) == ["trace.grounding"]


def test_external_facts_are_refused_unless_the_policy_allows_them(
    audited: tuple[PromptSpec, EvidenceBundle, ReasoningTrace],
) -> None:
    spec, bundle, trace = audited
    inputs = {**trace.steps[3].inputs, "context": [{"external_facts": ["BTC hit 120k on X"]}]}
    steps = [*trace.steps[:3], changed(trace.steps[3], inputs=inputs), *trace.steps[4:]]
    result = verify(spec, bundle, rebuilt(trace, steps))
    assert failed_ids(result) == ["trace.external_facts"]
    assert "inputs.context[0].external_facts" in result.checks[0].message
    allowed = trace.policy.model_copy(update={"allow_external_sources": True})
    assert verify(spec, bundle, rebuilt(trace, steps, policy=allowed)).ok


def test_a_step_deciding_an_outcome_fails(audited: tuple[PromptSpec, EvidenceBundle, ReasoningTrace]) -> None:
    spec, bundle, trace = audited
    variables = {**trace.steps[-1].output["evaluation_variables"], "outcome": "YES"}
    steps = [*trace.steps[:-1], changed(trace.steps[-1], output={"evaluation_variables": variables})]
    assert failed_ids(verify(spec, bundle, rebuilt(trace, steps))) == ["trace.no_verdict"]


def test_hash_commitments_must_match(audited: tuple[PromptSpec, EvidenceBundle, ReasoningTrace]) -> None:
    spec, bundle, trace = audited
    good = [changed(step, hash_commitment=step_hash(step)) for step in trace.steps]
    assert verify(spec, bundle, rebuilt(trace, good)).ok
    bad = [*good[:1], changed(good[1], hash_commitment="0x" + "00" * 32), *good[2:]]
    result = verify(spec, bundle, rebuilt(trace, bad))
    assert failed_ids(result) == ["trace.hash_commitments"]
    assert result.challenge is not None and result.challenge.step_id == trace.steps[1].step_id


def test_steps_given_as_plain_dicts_and_garbage_are_checked_field_by_field(
    audited: tuple[PromptSpec, EvidenceBundle, ReasoningTrace],
) -> None:
    spec, bundle, trace = audited
    dict_steps = [step.model_dump() for step in trace.steps]
    assert verify(spec, bundle, rebuilt(trace, dict_steps)).ok
    dict_steps[0] = {**dict_steps[0], "type": "guess", "evidence_ids": "ev_1"}
    result = verify(spec, bundle, rebuilt(trace, dict_steps))
    assert "trace.step_schema" in failed_ids(result)
    empty = verify(spec, bundle, rebuilt(trace, []))
    assert failed_ids(empty) == ["trace.final_evaluation_variables"]


_scan_keys = st.sampled_from(["a", "b", "external_facts", "web_search", "llm_knowledge", "z"])
_scan_values = st.recursive(
    st.none() | st.integers() | st.text(max_size=3),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_scan_keys, children, max_size=3),
    max_leaves=40,
)


@given(_scan_values)
@settings(max_examples=400)
def test_external_fact_presence_scan_agrees_with_the_path_walk(value: object) -> None:
    from engine.auditor.verification.trace_policy import EXTERNAL_FACT_KEYS, _find_key, holds_key

    assert holds_key(value, EXTERNAL_FACT_KEYS, 0) == (
        _find_key(value, EXTERNAL_FACT_KEYS, "inputs", 0) is not None
    )


def test_external_fact_scan_respects_the_depth_bound() -> None:
    from engine.auditor.verification.trace_policy import EXTERNAL_FACT_KEYS, _find_key, holds_key

    for depth in (15, 16, 17, 18):
        nested: object = {"web_search": 1}
        for _ in range(depth):
            nested = {"a": [nested]}
        assert holds_key(nested, EXTERNAL_FACT_KEYS, 0) == (
            _find_key(nested, EXTERNAL_FACT_KEYS, "inputs", 0) is not None
        )


def _as_plain_trace(trace: ReasoningTrace) -> dict[str, Any]:
    """The same trace as plain dicts: the verifier's rule-by-rule path reads it field by field."""
    plain = dict(trace.__dict__)
    plain["policy"] = dict(trace.policy.__dict__)
    plain["steps"] = [dict(step.__dict__) for step in trace.steps]
    return plain


def _mutations(trace: ReasoningTrace) -> list[ReasoningTrace]:
    last = len(trace.steps) - 1
    out = []

    def edit(index: int, **update: Any) -> None:
        steps = list(trace.steps)
        steps[index] = steps[index].model_copy(update=update)
        out.append(trace.model_copy(update={"steps": steps}))

    edit(0, step_id="step_9")
    edit(1, step_id="Step_0002")
    edit(1, prior_step_ids=["step_0099"])
    edit(0, evidence_ids=[])
    edit(0, evidence_ids=["not_in_bundle"])
    edit(0, inputs={**trace.steps[0].inputs, "deep": [{"web_search": 1}]})
    edit(1, output={**trace.steps[1].output, "verdict": "YES"})
    edit(last, output={"evaluation_variables": {"outcome": "YES"}})
    edit(last, type="deduce")
    edit(last, output={"evaluation_variables": {"source_summary": ["x"]}})
    out.append(trace.model_copy(update={"evidence_refs": ["zz"]}))
    out.append(trace.model_copy(update={"policy": trace.policy.model_copy(update={"max_steps": 2})}))
    out.append(trace.model_copy(update={"steps": []}))
    return out


def test_one_pass_screen_and_rule_by_rule_path_agree_on_corpus_and_broken_traces() -> None:
    verifier = TracePolicyVerifier()
    for path in sorted(CORPUS_DIR.glob("[0-9][0-9]_*.json"))[:10]:
        doc = json.loads(path.read_bytes())
        spec = PromptSpec.model_validate(doc["prompt_spec"])
        bundle = EvidenceBundle.model_validate(doc["evidence_bundle"])
        trace, _ = AuditorAgent().audit(spec, bundle)
        for candidate in [trace, *_mutations(trace)]:
            fast = verifier.verify(candidate, spec, bundle)
            slow = verifier.verify(_as_plain_trace(candidate), spec, bundle)  # type: ignore[arg-type]
            assert fast == slow
            assert verifier._every_rule_holds(candidate, {i.evidence_id for i in bundle.items}) == slow.ok
