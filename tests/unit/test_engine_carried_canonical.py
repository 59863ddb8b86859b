"""The steps' canonical bytes made by the trace builder equal a fresh canonicalisation, corpus-wide."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.auditor import AuditorAgent, audit_report
from engine.canonical import canonical_bytes, canonicalize_value
from engine.commitments import commit_inputs, plain_step, step_hash, step_preimage
from engine.jsonio import loads_strict
from engine.pipeline import run_pipeline
from engine.schemas import (
    CheckResult,
    EvidenceBundle,
    PromptSpec,
    ReasoningStep,
    ReasoningTrace,
    VerificationResult,
)
from tests.golden.regenerate import corpus_paths

STEP: dict[str, Any] = {
    "step_id": "step_0001",
    "type": "map",
    "inputs": {"a": [1, None], "b": None},
    "action": "map_evaluation_variables",
    "output": {"evaluation_variables": {"x": None, "y": 1.5}},
    "evidence_ids": ["e1"],
    "prior_step_ids": [],
}

hypothesis_floats = st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | hypothesis_floats
    | st.sampled_from([1e-05, 0.00012, 1e15, 999999999999999.9, 0.001, 0.0009999999999999998, -0.0])
    | st.text(max_size=6),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=20,
)


def _corpus() -> list[tuple[PromptSpec, EvidenceBundle]]:
    out = []
    for path in corpus_paths():
        document = loads_strict(path.read_bytes())
        out.append(
            (
                PromptSpec.model_validate(document["prompt_spec"]),
                EvidenceBundle.model_validate(document["evidence_bundle"]),
            )
        )
    assert len(out) >= 30
    return out


class _OwnAudit:
    """An auditor that is not an ``AuditorAgent``: the pipeline commits to the trace it returns.

    (A wrapper, not a subclass: a compiled build makes ``AuditorAgent`` a native class.)
    """

    def __init__(self) -> None:
        self.inner = AuditorAgent()

    def audit(
        self, prompt_spec: PromptSpec, evidence: EvidenceBundle
    ) -> tuple[ReasoningTrace, VerificationResult]:
        return self.inner.audit(prompt_spec, evidence)


def test_carried_step_bytes_equal_a_fresh_canonicalisation_of_every_corpus_step() -> None:
    for spec, bundle in _corpus():
        outcome = AuditorAgent().audit_committed(spec, bundle)
        trace, verification = AuditorAgent().audit(spec, bundle)
        assert outcome.trace.model_dump_json() == trace.model_dump_json()
        assert outcome.verification.model_dump_json() == verification.model_dump_json()
        assert len(outcome.step_plains) == len(outcome.step_preimages) == len(trace.steps)
        for step, plain, preimage in zip(
            trace.steps, outcome.step_plains, outcome.step_preimages, strict=True
        ):
            assert plain == canonicalize_value(step)
            assert preimage == canonical_bytes(step)
            assert "0x" + hashlib.sha256(preimage).hexdigest() == step_hash(step)


def test_pipeline_and_report_give_the_same_bytes_with_and_without_carried_preimages() -> None:
    for spec, bundle in _corpus():
        carried, own = run_pipeline(spec, bundle), run_pipeline(spec, bundle, auditor=_OwnAudit())
        assert carried.canonical_json() == own.canonical_json()
        assert carried.step_canonical == own.step_canonical
        assert carried.step_canonical == tuple(canonical_bytes(step) for step in carried.trace.steps)
        report = audit_report(spec, bundle)
        assert report["trace"] == canonicalize_value(own.trace)
        assert report["step_hashes"] == [step_hash(step) for step in own.trace.steps]


def test_commit_inputs_refuses_preimages_that_do_not_match_the_steps() -> None:
    spec, bundle = _corpus()[0]
    outcome = AuditorAgent().audit_committed(spec, bundle)
    with pytest.raises(ValueError, match="step preimages"):
        commit_inputs(spec, bundle, outcome.trace, preimages=outcome.step_preimages[:-1])
    with_carried = commit_inputs(spec, bundle, outcome.trace, preimages=outcome.step_preimages)
    assert with_carried == commit_inputs(spec, bundle, outcome.trace)


def test_plain_step_reads_plain_steps_and_declines_the_rest() -> None:
    step = ReasoningStep(**STEP)
    assert plain_step(step) == canonicalize_value(step)
    assert step_preimage(step) == (canonicalize_value(step), canonical_bytes(step))
    committed = ReasoningStep(**STEP, hash_commitment="0x" + "00" * 32)
    assert plain_step(committed) is None
    assert step_preimage(committed)[1] == canonical_bytes(step)
    odd = ReasoningStep(**{**STEP, "inputs": {"t": (1, None), "m": CheckResult.passed("x", "y")}})
    assert plain_step(odd) is None
    assert step_preimage(odd) == (canonicalize_value(odd), canonical_bytes(odd))


def test_builder_carries_bytes_of_steps_it_cannot_read_field_by_field() -> None:
    from engine.auditor.trace_builder import _Steps

    steps = _Steps(["e1"], commit=True)
    steps.add("check", "odd", {"t": (1, None)}, {"n": [1.5, None]}, ["e1", 7], [])  # type: ignore[list-item]
    assert not steps.sound
    assert steps.plains == [canonicalize_value(steps.steps[0])]
    assert steps.preimages == [canonical_bytes(steps.steps[0])]


def test_report_of_an_auditor_subclass_commits_to_the_trace_its_audit_returns() -> None:
    spec, bundle = _corpus()[1]
    try:

        class Relabelled(AuditorAgent):
            def audit(
                self, prompt_spec: PromptSpec, evidence: EvidenceBundle, *, ctx: Any | None = None
            ) -> tuple[ReasoningTrace, VerificationResult]:
                trace, verification = super().audit(prompt_spec, evidence, ctx=ctx)
                return trace.model_copy(update={"trace_id": "trace_relabelled"}), verification

        agent = Relabelled()
    except TypeError as exc:  # compiled build: AuditorAgent is a native class, not subclassable here
        assert "cannot inherit from compiled" in str(exc)
        return
    report = audit_report(spec, bundle, agent=agent)
    assert report["trace_id"] == report["trace"]["trace_id"] == "trace_relabelled"
    assert report["step_hashes"] == audit_report(spec, bundle)["step_hashes"]


def test_orjson_writes_every_float_the_step_fast_path_accepts_as_repr_does() -> None:
    """The range ``step_preimage`` hands to orjson unchecked: its edges, and a sweep of magnitudes."""
    import orjson

    edges = [0.0, -0.0, 1e-3, -1e-3, 0.001000001, 1e15 - 0.125, -(1e15 - 0.125), 95000.0, 0.1, 1 / 3]
    sweep = [
        sign * mantissa * 10.0**exponent
        for sign in (1, -1)
        for mantissa in (1, 1.5, 2.5e-1, 9.999999999999999, 7.123456789012345)
        for exponent in range(-3, 15)
    ]
    for value in edges + sweep:
        if value == 0.0 or 1e-3 <= abs(value) < 1e15:
            assert orjson.dumps(value) == repr(value).encode(), value


@given(hypothesis_floats)
@settings(max_examples=3000)
def test_orjson_equals_repr_on_random_floats_in_the_accepted_range(value: float) -> None:
    import orjson

    if value == 0.0 or 1e-3 <= abs(value) < 1e15:
        assert orjson.dumps(value) == repr(value).encode()


def _outcome(make: Any, step: ReasoningStep) -> Any:
    """What ``make(step)`` returns, or the type and message of what it raises."""
    try:
        return make(step)
    except Exception as exc:  # compared, never swallowed: both paths must fail alike
        return type(exc).__name__, str(exc)


def _reference(step: ReasoningStep) -> Any:
    return canonicalize_value(step), canonical_bytes(step)


@given(json_values, json_values)
@settings(max_examples=600)
def test_step_preimage_equals_the_reference_on_random_json_data(inputs: Any, output: Any) -> None:
    step = ReasoningStep(**{**STEP, "inputs": {"v": inputs}, "output": {"w": output}})
    assert _outcome(step_preimage, step) == _outcome(_reference, step)
    plain = plain_step(step)
    assert plain is None or plain == canonicalize_value(step)


def test_step_preimage_of_small_and_big_floats_and_big_ints_uses_the_exact_path() -> None:
    for odd in (1e-05, 0.00001234, 1e-7, 5e-324, 1e16, 1.5e300, -2.5e-10, 2**70, "\ud800", float("nan")):
        step = ReasoningStep(**{**STEP, "inputs": {"v": [odd, {"x": odd}]}})
        assert _outcome(step_preimage, step) == _outcome(_reference, step), odd
