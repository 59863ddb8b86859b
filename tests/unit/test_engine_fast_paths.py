"""The engine's fast paths equal the validated / reference paths they replace."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.auditor import AuditorAgent
from engine.canonical import canonical_bytes, canonical_bytes_of_plain, canonicalize_value
from engine.commitments import commit_inputs, step_hash, step_preimages
from engine.schemas import (
    ChallengeRef,
    CheckResult,
    CournotError,
    EvidenceBundle,
    PromptSpec,
    ReasoningStep,
    ReasoningTrace,
    TracePolicy,
    VerificationResult,
)
from engine.schemas.trusted import trusted
from tests.golden.regenerate import CORPUS_DIR

STEP = {
    "step_id": "step_0001",
    "type": "map",
    "inputs": {"a": [1, None]},
    "action": "map_evaluation_variables",
    "output": {"evaluation_variables": {"x": None}},
    "evidence_ids": ["e1"],
    "prior_step_ids": [],
}

CASES: list[tuple[type[Any], dict[str, Any]]] = [
    (CheckResult, {"check_id": "c", "ok": True, "severity": "info", "message": "m", "details": {"k": [1]}}),
    (ReasoningStep, STEP),
    (
        TracePolicy,
        {"decoding_policy": "strict", "allow_external_sources": False, "max_steps": 9, "extra": {}},
    ),
    (ChallengeRef, {"kind": "reasoning_leaf", "leaf_index": 2, "step_id": "step_0003", "reason": "r"}),
    (CournotError, {"code": "x", "message": "y", "details": {"failed_checks": ["a"]}}),
    (VerificationResult, {"ok": False, "checks": [], "challenge": None, "error": None}),
    (ReasoningTrace, {"trace_id": "t", "steps": [], "evidence_refs": ["e1"]}),
]


@pytest.mark.parametrize(("model", "values"), CASES, ids=[case[0].__name__ for case in CASES])
def test_trusted_construction_equals_validated_construction(model: type[Any], values: dict[str, Any]) -> None:
    built = trusted(model, **values)
    validated = model(**values)
    assert built == validated
    assert built.model_fields_set == validated.model_fields_set
    assert built.model_dump() == validated.model_dump()
    assert list(built.model_dump()) == list(validated.model_dump())
    assert canonical_bytes(built) == canonical_bytes(validated)


def test_trusted_construction_refuses_unknown_fields() -> None:
    with pytest.raises(TypeError, match="no field"):
        trusted(CheckResult, check_id="c", ok=True, severity="info", message="m", details={}, extra=1)


@pytest.mark.parametrize("factory", [CheckResult.passed, CheckResult.warning, CheckResult.failed])
def test_check_result_helpers_equal_validated_checks(factory: Any) -> None:
    details = {"n": 1}
    check = factory("x.y", "message", details)
    expected = CheckResult(
        check_id="x.y", ok=check.ok, severity=check.severity, message="message", details=details
    )
    assert check == expected and check.details is not details
    assert factory("x.y", "message") == factory("x.y", "message", {})
    assert list(vars(check)) == list(vars(expected))  # the same field order in __dict__
    assert vars(factory("x.y", "message")) is not vars(factory("x.y", "message"))  # fresh dicts


def test_check_result_helpers_still_validate_bad_values() -> None:
    with pytest.raises(ValueError):
        CheckResult.passed("", "empty id")
    with pytest.raises(ValueError):
        CheckResult.failed("x", 3)  # type: ignore[arg-type]


any_text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=12)
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True)
    | any_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(any_text, children, max_size=4),
    max_leaves=25,
)


@given(values)
@settings(max_examples=800)
def test_canonical_bytes_of_plain_equals_canonical_bytes(value: Any) -> None:
    assert canonical_bytes_of_plain(canonicalize_value(value)) == canonical_bytes(value)


def _corpus() -> list[tuple[PromptSpec, EvidenceBundle]]:
    out = []
    for path in sorted(CORPUS_DIR.glob("[0-9][0-9]_*.json"))[:12]:
        doc = json.loads(path.read_bytes())
        out.append(
            (
                PromptSpec.model_validate(doc["prompt_spec"]),
                EvidenceBundle.model_validate(doc["evidence_bundle"]),
            )
        )
    return out


def test_step_preimages_are_the_committed_bytes_of_every_corpus_step() -> None:
    for spec, bundle in _corpus():
        trace, _ = AuditorAgent().audit(spec, bundle)
        plains, preimages = step_preimages(trace.steps)
        inputs = commit_inputs(spec, bundle, trace)
        for step, plain, preimage, committed, text in zip(
            trace.steps, plains, preimages, inputs.step_hashes, inputs.step_canonical, strict=True
        ):
            assert plain == canonicalize_value(step)
            assert preimage == canonical_bytes(step) == text
            assert "0x" + hashlib.sha256(preimage).hexdigest() == step_hash(step) == committed


def test_step_preimages_leave_hash_commitment_out() -> None:
    step = ReasoningStep(**STEP, hash_commitment="0x" + "00" * 32)
    _, preimages = step_preimages([step])
    assert "0x" + hashlib.sha256(preimages[0]).hexdigest() == step_hash(step)
    assert b"hash_commitment" not in preimages[0]


def test_pipeline_carries_each_steps_canonical_bytes_as_the_ledger_would_store_them() -> None:
    from engine.pipeline import run_pipeline
    from ledger.store.payloads import step_draft

    for spec, bundle in _corpus()[:4]:
        result = run_pipeline(spec, bundle)
        assert len(result.step_canonical) == len(result.trace.steps)
        for index, step in enumerate(result.trace.steps):
            draft = step_draft(index, step)
            assert result.step_canonical[index].decode("utf-8") == draft.canonical_step
            assert draft.step_hash == result.step_hashes[index]
        assert "step_canonical" not in result.canonical_json()


def test_trusted_construction_refuses_missing_required_fields() -> None:
    with pytest.raises(TypeError, match="needs the field 'message'"):
        trusted(CheckResult, check_id="c", ok=True, severity="info", details={})


def test_trusted_step_equals_validated_step() -> None:
    from engine.schemas.trusted import trusted_step

    values = {key: value for key, value in STEP.items() if key != "type"}
    built = trusted_step(ReasoningStep, step_type="map", **values)
    validated = ReasoningStep(**STEP)
    assert built == validated
    assert built.model_fields_set == validated.model_fields_set
    assert canonical_bytes(built) == canonical_bytes(validated)
    assert list(vars(built)) == list(vars(validated))  # the same field order in __dict__
    again = trusted_step(ReasoningStep, step_type="check", **values)
    assert again.type == "check" and built.type == "map" and vars(again) is not vars(built)


@given(values)
@settings(max_examples=500)
def test_plain_data_equals_canonicalize_value_on_json_data(value: Any) -> None:
    from engine.canonical import plain_data

    assert plain_data(value) == canonicalize_value(value)


@pytest.mark.parametrize("value", [(1, 2), {"a": b"x"}, [float("nan")], {1: 2}, {"d": ReasoningStep(**STEP)}])
def test_plain_data_refuses_anything_but_json_data(value: Any) -> None:
    from engine.canonical import plain_data

    with pytest.raises(ValueError):
        plain_data(value)


def test_step_preimages_of_a_step_holding_a_model_or_tuple_use_the_model_dump() -> None:
    odd = ReasoningStep(**{**STEP, "inputs": {"t": (1, None), "m": CheckResult.passed("x", "y")}})
    plains, preimages = step_preimages([odd])
    assert plains[0] == canonicalize_value(odd)
    assert preimages[0] == canonical_bytes(odd)


def test_step_preimages_of_a_step_whose_field_dict_is_not_its_fields_use_the_model_dump() -> None:
    from engine.canonical import _canonicalize_reference

    stray = ReasoningStep(**STEP)
    stray.__dict__["stray"] = "not a field"  # the dump ignores it; the plain value must too
    swapped = ReasoningStep(**STEP)
    swapped.__dict__["stray"] = "x"
    del swapped.__dict__["action"]  # as many entries as fields, one of them not a field
    for step in (stray, swapped):
        plains, preimages = step_preimages([step])
        assert "stray" not in plains[0]
        assert plains[0] == _canonicalize_reference(step)
        assert preimages[0] == canonical_bytes(plains[0])


def test_canonical_walk_of_every_corpus_result_equals_the_reference_walk() -> None:
    from engine.canonical import _canonicalize_reference
    from engine.pipeline import run_pipeline

    for spec, bundle in _corpus():
        result = run_pipeline(spec, bundle)
        for value in (result, result.trace, result.audit_verification, result.verdict, spec, bundle):
            fast = canonicalize_value(value)
            assert fast == _canonicalize_reference(value)
            assert json.dumps(fast) == json.dumps(_canonicalize_reference(value))  # same key order


class _LoudCheck(CheckResult):
    """A subclass with a field the declared class does not have."""

    extra_note: str = "x"


def test_a_model_subclass_in_a_typed_field_is_dumped_as_pydantic_dumps_it() -> None:
    from engine.canonical import _canonicalize_reference

    loud = _LoudCheck(check_id="c", ok=True, severity="info", message="m")
    result = VerificationResult.model_construct(ok=True, checks=[loud], challenge=None, error=None)
    assert canonicalize_value(result) == _canonicalize_reference(result)
    assert "extra_note" not in json.dumps(canonicalize_value(result))
    assert canonicalize_value({"any": loud})["any"]["extra_note"] == "x"  # untyped: by runtime class


def test_pipeline_carries_the_prompt_spec_canonical_bytes_behind_its_hash() -> None:
    from engine.pipeline import run_pipeline

    spec, bundle = _corpus()[0]
    result = run_pipeline(spec, bundle)
    assert result.prompt_spec_canonical == canonical_bytes(spec)
    assert "0x" + hashlib.sha256(result.prompt_spec_canonical).hexdigest() == result.roots.prompt_spec_hash


def test_pipeline_carries_the_verdict_canonical_bytes_behind_its_hash_on_the_corpus() -> None:
    """``verdict_canonical`` is the verdict's canonical bytes and the preimage of ``verdict_hash``;
    the roots equal those computed without the bytes, and the evaluation variables are the located
    step's (the judge locates them once for itself and the result)."""
    from engine.commitments import compute_roots
    from engine.judge import JudgeAgent, locate_evaluation_variables
    from engine.pipeline import run_pipeline

    plain_judge: JudgeAgent | None = None
    try:

        class PlainJudge(JudgeAgent):  # overrides judge(): the pipeline locates the variables itself
            def judge(self, *args: Any, **kwargs: Any) -> Any:
                return super().judge(*args, **kwargs)

        plain_judge = PlainJudge()
    except TypeError as exc:  # compiled build: JudgeAgent is a native class, not subclassable here
        assert "cannot inherit from compiled" in str(exc)
    for spec, bundle in _corpus():
        result = run_pipeline(spec, bundle)
        assert result.verdict_canonical == canonical_bytes(result.verdict)
        assert "0x" + hashlib.sha256(result.verdict_canonical).hexdigest() == result.roots.verdict_hash
        assert compute_roots(spec, bundle, result.trace, result.verdict) == result.roots
        located = locate_evaluation_variables(result.trace)
        assert result.evaluation_variables == (None if located is None else dict(located.raw))
        if plain_judge is not None:
            assert run_pipeline(spec, bundle, judge=plain_judge).canonical_json() == result.canonical_json()


def test_cached_event_spec_equals_the_uncached_derivation_on_the_corpus() -> None:
    from engine.auditor.reasoning.semantics import _event_spec, derive_event_spec

    for spec, _ in _corpus():
        semantics, market = spec.prediction_semantics, spec.market
        if market.market_type == "multi_choice":
            continue
        fresh = _event_spec.__wrapped__(semantics.predicate, semantics.threshold, market.event_definition)
        assert derive_event_spec(spec) == fresh


def test_cached_event_checks_are_fresh_objects_per_audit() -> None:
    spec, bundle = _corpus()[0]
    agent = AuditorAgent()
    first = {check.check_id: check for check in agent.audit(spec, bundle)[1].checks}
    first["sanity.threshold"].details["text"] = "changed by a caller"
    first["sanity.comparator"].details.clear()
    second = {check.check_id: check for check in agent.audit(spec, bundle)[1].checks}
    assert second["sanity.threshold"].details["text"] == spec.prediction_semantics.threshold
    assert second["sanity.comparator"].details  # the cached recipe was not emptied
    assert second["sanity.threshold"] is not first["sanity.threshold"]


_OFFSETS = st.builds(
    lambda minutes, seconds: timezone(timedelta(minutes=minutes, seconds=seconds)),
    st.integers(-23 * 60, 23 * 60),
    st.sampled_from([0, 0, 30]),
)
_ZONES = st.one_of(st.none(), st.just(UTC), _OFFSETS, st.timezones())


@given(st.datetimes(timezones=_ZONES))
@settings(max_examples=1500)
def test_datetime_format_equals_the_field_by_field_reference(value: datetime) -> None:
    from engine.canonical import _format_fields, format_datetime_canonical

    try:
        expected = _format_fields(value)
    except OverflowError:
        with pytest.raises(OverflowError):
            format_datetime_canonical(value)
        return
    assert format_datetime_canonical(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        datetime(999, 12, 31, 23, 30, tzinfo=UTC),
        datetime(1000, 1, 1, 0, 30, tzinfo=timezone(timedelta(hours=1))),
        datetime(2024, 5, 1, 12, 0, 0, 120),
        datetime(2024, 5, 1, 12, 0, tzinfo=timezone(timedelta(seconds=30))),
    ],
)
def test_datetime_format_edges_equal_the_reference(value: datetime) -> None:
    from engine.canonical import _format_fields, format_datetime_canonical

    assert format_datetime_canonical(value) == _format_fields(value)
