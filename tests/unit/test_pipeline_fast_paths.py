"""The pipeline's round-14 fast paths equal the validating / per-run paths they replace."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

import engine.pipeline as pipeline
from engine.auditor import AuditorAgent
from engine.commitments import InputCommitments, compute_roots, por_root, roots_model
from engine.comparison import is_finite_number
from engine.judge import JudgeAgent, variables
from engine.judge.policy import ConfidencePolicy
from engine.judge.rules import challenge_ref
from engine.pipeline import run_pipeline
from engine.pipeline_fields import engine_made
from engine.schemas import ChallengeRef, EvidenceBundle, PoRRoots, PromptSpec
from tests.golden.regenerate import CORPUS_DIR

_POLICY_KEYS = (
    "default_confidence",
    "min_confidence_for_yesno",
    "conflict_multiplier",
    "fallback_multiplier",
    "invalid_confidence",
    "conflict_action",
)
_HASHES = ("prompt_spec_hash", "evidence_root", "reasoning_root", "verdict_hash", "por_root")
_COUNTS = ("evidence_leaf_count", "reasoning_leaf_count")

_HEX = st.text(alphabet="0123456789abcdefABCDEF", min_size=63, max_size=65)
_HASH_TEXT = st.one_of(
    _HEX.map(lambda digits: "0x" + digits),
    _HEX.map(lambda digits: "0X" + digits),
    _HEX.map(lambda digits: "0x" + digits + "\n"),
    _HEX.map(lambda digits: " 0x" + digits),
    st.text(max_size=70),
)
_HASH_VALUE = st.one_of(
    _HASH_TEXT,
    st.none(),
    st.integers(),
    _HASH_TEXT.map(lambda text: text.encode()),
)
_COUNT_VALUE = st.one_of(
    st.integers(min_value=-3, max_value=2**70),
    st.booleans(),
    st.floats(allow_nan=False, min_value=-2, max_value=5),
    st.sampled_from(["3", None, 3.0]),
)


@st.composite
def _roots_values(draw: st.DrawFn) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in ("prompt_spec_hash", "evidence_root", "evidence_leaf_count", "reasoning_root"):
        values[name] = draw(_COUNT_VALUE if name in _COUNTS else _HASH_VALUE)
    values["reasoning_leaf_count"] = draw(_COUNT_VALUE)
    values["verdict_hash"] = draw(_HASH_VALUE)
    values["por_root"] = draw(_HASH_VALUE)
    if draw(st.booleans()):
        del values[draw(st.sampled_from(sorted(values)))]
    if draw(st.booleans()):
        values["extra_field"] = draw(_HASH_VALUE)
    return values


_VALID_HASH = st.text(alphabet="0123456789abcdefABCDEF", min_size=64, max_size=64).map(lambda d: "0x" + d)


@st.composite
def _valid_roots_values(draw: st.DrawFn) -> dict[str, Any]:
    values: dict[str, Any] = {name: draw(_VALID_HASH) for name in _HASHES}
    for name in _COUNTS:
        values[name] = draw(st.one_of(st.sampled_from([-1, 0, 1]), st.integers(min_value=-2), _COUNT_VALUE))
    return values


def _same(made: PoRRoots, reference: PoRRoots) -> None:
    assert type(made) is PoRRoots
    assert made == reference
    assert made.__dict__ == reference.__dict__
    assert list(made.__dict__) == list(reference.__dict__)
    assert made.model_fields_set == reference.model_fields_set
    assert made.model_dump_json() == reference.model_dump_json()
    assert made.__pydantic_extra__ == reference.__pydantic_extra__


def _errors(error: ValidationError) -> list[Any]:
    return [
        (entry["type"], entry["loc"], entry["msg"], repr(entry["input"]))
        for entry in error.errors(include_url=False, include_context=False)
    ]


@given(st.one_of(_roots_values(), _valid_roots_values()))
@settings(max_examples=1500)
def test_roots_model_equals_the_validating_constructor(values: dict[str, Any]) -> None:
    try:
        reference = PoRRoots(**values)
    except ValidationError as refused:
        with pytest.raises(ValidationError) as raised:
            roots_model(dict(values))
        assert _errors(raised.value) == _errors(refused)
        return
    _same(roots_model(dict(values)), reference)


def test_roots_model_refuses_what_validation_refuses() -> None:
    good = {name: "0x" + "ab" * 32 for name in _HASHES} | dict.fromkeys(_COUNTS, 1)
    _same(roots_model(dict(good)), PoRRoots(**good))
    for name, bad in [
        ("evidence_leaf_count", -1),
        ("por_root", "0x" + "ab" * 31),
        ("por_root", "0x" + "zz" * 32),
        ("verdict_hash", None),
    ]:
        with pytest.raises(ValidationError):
            roots_model(good | {name: bad})
    with pytest.raises(ValidationError):
        roots_model(good | {"unknown": 1})
    upper = good | {"por_root": "0x" + "AB" * 32}
    _same(roots_model(dict(upper)), PoRRoots(**upper))
    assert roots_model(dict(upper)).por_root == "0x" + "ab" * 32
    # lax validation coerces these; the fast path leaves them to it
    for name, coerced in [("evidence_leaf_count", True), ("reasoning_leaf_count", 1.0)]:
        made = roots_model(good | {name: coerced})
        assert type(made.__dict__[name]) is int
        _same(made, PoRRoots(**(good | {name: coerced})))


def _corpus() -> list[tuple[PromptSpec, EvidenceBundle]]:
    pairs = []
    for path in sorted(CORPUS_DIR.glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        try:
            pairs.append(
                (
                    PromptSpec.model_validate(document["prompt_spec"]),
                    EvidenceBundle.model_validate(document["evidence_bundle"]),
                )
            )
        except ValidationError:
            continue
    return pairs


def test_default_agents_are_shared_and_give_what_fresh_agents_give() -> None:
    pairs = _corpus()
    assert len(pairs) >= 30
    assert type(pipeline._DEFAULT_AUDITOR) is AuditorAgent
    assert type(pipeline._DEFAULT_JUDGE) is JudgeAgent
    for spec, bundle in pairs:
        shared = run_pipeline(spec, bundle)
        fresh = run_pipeline(spec, bundle, auditor=AuditorAgent(), judge=JudgeAgent())
        again = run_pipeline(spec, bundle)
        assert shared.canonical_json() == fresh.canonical_json() == again.canonical_json()
        assert shared.step_canonical == fresh.step_canonical
        assert shared.verdict_canonical == fresh.verdict_canonical


def test_default_auditor_state_does_not_leak_between_markets() -> None:
    """A market's ``audit_policy`` override never sticks to the shared auditor."""
    pairs = _corpus()
    spec, bundle = pairs[0]
    overridden = spec.model_copy(update={"extra": {**spec.extra, "audit_policy": {"numeric_tolerance": 0.5}}})
    plain_before = run_pipeline(spec, bundle).canonical_json()
    changed = run_pipeline(overridden, bundle).canonical_json()
    assert changed != plain_before
    assert run_pipeline(spec, bundle).canonical_json() == plain_before
    assert pipeline._DEFAULT_AUDITOR.config == AuditorAgent().config
    assert pipeline._DEFAULT_AUDITOR.name == AuditorAgent().name


_JSONISH = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**80), max_value=2**1100),
        st.floats(),
        st.text(max_size=5),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
_VARIABLE_KEYS = (
    "event_observed",
    "numeric_value",
    "threshold",
    "timestamp",
    "observed_outcome",
    "fallback_used",
    "selection",
    "comparator",
    "source_summary",
    "conflict_detected",
    "insufficient_evidence",
)


def _reference_optional(raw: dict[str, Any], key: str, problems: list[str], kind: str) -> Any:
    """``variables._optional`` as it was: every kind's test evaluated, one picked."""
    value = raw.get(key)
    if value is None:
        return None
    ok = {
        "bool": isinstance(value, bool),
        "number": is_finite_number(value),
        "str": isinstance(value, str),
    }[kind]
    if not ok:
        problems.append(f"evaluation_variables.{key} must be a {kind} or absent, got {value!r}")
        return None
    return value


@given(
    st.dictionaries(st.sampled_from(_VARIABLE_KEYS), _JSONISH, max_size=8),
    st.sampled_from(["bool", "number", "str"]),
)
@settings(max_examples=1500)
def test_optional_equals_the_table_it_replaces(raw: dict[str, Any], kind: str) -> None:
    for key in _VARIABLE_KEYS:
        made: list[str] = []
        reference: list[str] = []
        value = variables._optional(raw, key, made, kind)
        expected = _reference_optional(raw, key, reference, kind)
        assert made == reference
        assert value is expected


class _Odd(int):
    def __float__(self) -> float:
        raise ZeroDivisionError("odd")


def test_optional_still_raises_where_the_table_raised() -> None:
    """An int subclass whose float conversion raises failed every kind before; it still does."""
    for kind in ("bool", "number", "str"):
        with pytest.raises(ZeroDivisionError):
            variables._optional({"x": _Odd(3)}, "x", [], kind)


def _reference_fallback_used(raw: Mapping[str, Any], problems: list[str]) -> bool:
    """``variables._fallback_used`` as it was (the ABC's instance check for every value)."""
    flag = _reference_optional(dict(raw), "fallback_used", problems, "bool")
    selection = raw.get("selection")
    nested = selection.get("fallback_used") if isinstance(selection, Mapping) else None
    if nested is not None and not isinstance(nested, bool):
        problems.append(f"evaluation_variables.selection.fallback_used must be a bool, got {nested!r}")
        nested = None
    return flag is True or nested is True


_SELECTION = st.one_of(
    _JSONISH,
    st.dictionaries(st.just("fallback_used"), _JSONISH, max_size=1),
    st.dictionaries(st.just("fallback_used"), _JSONISH, max_size=1).map(MappingProxyType),
)


@given(st.dictionaries(st.sampled_from(["fallback_used", "selection"]), _JSONISH, max_size=2), _SELECTION)
@settings(max_examples=1000)
def test_fallback_used_equals_the_reference(raw: dict[str, Any], selection: Any) -> None:
    for candidate in (raw, {**raw, "selection": selection}):
        made: list[str] = []
        reference: list[str] = []
        assert variables._fallback_used(candidate, made) is _reference_fallback_used(candidate, reference)
        assert made == reference


_POLICY_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-3, max_value=3), st.floats(), st.text(max_size=8)
)  # ints stay small: ``from_extra`` raises OverflowError on one beyond a float's range (reported)


@given(st.one_of(_POLICY_VALUE, st.dictionaries(st.sampled_from(_POLICY_KEYS), _POLICY_VALUE, max_size=6)))
@settings(max_examples=800)
def test_confidence_policy_from_extra_takes_exact_dicts_and_mappings_alike(raw: Any) -> None:
    made, problems = ConfidencePolicy.from_extra({"confidence_policy": raw})
    viewed, viewed_problems = (
        ConfidencePolicy.from_extra({"confidence_policy": MappingProxyType(raw)})
        if type(raw) is dict
        else (made, problems)
    )
    assert problems == viewed_problems
    assert made.as_dict() == viewed.as_dict()
    if type(raw) is not dict and raw is not None:
        assert problems == [f"confidence_policy must be an object, got {type(raw).__name__}"]


_KINDS = ("evidence_leaf", "reasoning_leaf", "verdict_hash", "por_bundle", "provenance_tier")
_CHALLENGE_VALUE = st.one_of(
    st.none(),
    st.integers(min_value=-3, max_value=2**70),
    st.booleans(),
    st.floats(allow_nan=False),
    st.text(max_size=6),
    st.sampled_from([b"x", 1.0, [1]]),
)


@st.composite
def _challenge_values(draw: st.DrawFn) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        values["kind"] = draw(
            st.one_of(st.sampled_from(_KINDS), st.sampled_from(["", "Evidence_leaf", None, 3]))
        )
    for name in ("leaf_index", "evidence_id", "step_id", "reason"):
        if draw(st.booleans()):
            values[name] = draw(_CHALLENGE_VALUE)
    if not draw(st.integers(0, 9)):
        values["other"] = draw(_CHALLENGE_VALUE)
    return values


@given(_challenge_values())
@settings(max_examples=2000)
def test_challenge_ref_equals_the_validating_constructor(values: dict[str, Any]) -> None:
    try:
        reference = ChallengeRef(**values)
    except ValidationError as refused:
        with pytest.raises(ValidationError) as raised:
            challenge_ref(dict(values))
        assert _errors(raised.value) == _errors(refused)
        return
    made = challenge_ref(dict(values))
    assert type(made) is ChallengeRef
    assert made == reference
    assert list(made.__dict__.items()) == list(reference.__dict__.items())
    assert [type(value) for value in made.__dict__.values()] == [
        type(value) for value in reference.__dict__.values()
    ]
    assert made.model_fields_set == reference.model_fields_set
    assert made.model_dump_json(exclude_unset=True) == reference.model_dump_json(exclude_unset=True)


def _reference_roots(inputs: InputCommitments, verdict_hex: str) -> PoRRoots:
    return PoRRoots(
        prompt_spec_hash=inputs.prompt_spec_hash,
        evidence_root=inputs.evidence_root,
        evidence_leaf_count=inputs.evidence_leaf_count,
        reasoning_root=inputs.reasoning_root,
        reasoning_leaf_count=inputs.reasoning_leaf_count,
        verdict_hash=verdict_hex,
        por_root=por_root(inputs.prompt_spec_hash, inputs.evidence_root, inputs.reasoning_root, verdict_hex),
    )


_ANY_HEX = st.one_of(
    _VALID_HASH,
    _VALID_HASH.map(str.lower),
    _VALID_HASH.map(str.lower),
    st.text(alphabet="0123456789abcdef", min_size=62, max_size=66).map(lambda d: "0x" + d),
    _VALID_HASH.map(lambda text: text[:-1] + "g"),
    _VALID_HASH.map(lambda text: "0X" + text[2:]),
)


@given(
    _ANY_HEX,
    _ANY_HEX,
    _ANY_HEX,
    st.binary(max_size=40),
    st.sampled_from([0, 1, 7, -1, True]),
    st.sampled_from([0, 3, -2, False]),
)
@settings(max_examples=1500)
def test_compute_roots_equals_the_validated_roots(
    spec_hex: str, evidence_hex: str, reasoning_hex: str, verdict_bytes: bytes, ev_count: int, rs_count: int
) -> None:
    inputs = InputCommitments(
        prompt_spec_hash=spec_hex,
        evidence_root=evidence_hex,
        evidence_leaf_count=ev_count,
        reasoning_root=reasoning_hex,
        reasoning_leaf_count=rs_count,
        step_hashes=(),
    )
    verdict_hex = "0x" + hashlib.sha256(verdict_bytes).hexdigest()
    args: tuple[Any, ...] = (None, None, None, None)
    try:
        reference = _reference_roots(inputs, verdict_hex)
    except (ValidationError, ValueError) as refused:
        with pytest.raises(type(refused)):
            compute_roots(*args, inputs=inputs, verdict_canonical=verdict_bytes or b"\\0")
        return
    if not verdict_bytes:
        return  # an empty preimage means "hash the verdict" (needs a verdict); covered on the corpus
    made = compute_roots(*args, inputs=inputs, verdict_canonical=verdict_bytes)
    assert type(made) is PoRRoots
    assert list(made.__dict__.items()) == list(reference.__dict__.items())
    assert [type(value) for value in made.__dict__.values()] == [
        type(value) for value in reference.__dict__.values()
    ]
    assert made.model_fields_set == reference.model_fields_set


def _reference_engine_made(fields: dict[str, Any]) -> bool:
    """``engine.pipeline._result``'s guard as it was written there."""
    variables = fields["evaluation_variables"]
    return bool(
        all(type(fields[name]) is kind for name, kind in pipeline._RESULT_TYPES.items())
        and (variables is None or (type(variables) is dict and all(type(key) is str for key in variables)))
        and all(type(value) is str for value in fields["step_hashes"])
    )


class _Str(str):
    pass


_FIELD_VALUE = st.one_of(
    st.none(),
    st.text(max_size=3),
    st.builds(_Str, st.text(max_size=3)),
    st.lists(st.one_of(st.text(max_size=3), st.builds(_Str, st.text(max_size=2)), st.integers()), max_size=4),
    st.tuples(st.text(max_size=3)),
    st.dictionaries(
        st.one_of(st.text(max_size=3), st.integers(), st.builds(_Str)), st.integers(), max_size=3
    ),
    st.builds(dict),
)


@st.composite
def _result_fields(draw: st.DrawFn) -> dict[str, Any]:
    spec, bundle = _PAIRS[draw(st.integers(0, len(_PAIRS) - 1))]
    made = run_pipeline(spec, bundle)
    fields = {name: getattr(made, name) for name in pipeline.PipelineResult.model_fields}
    for name in draw(st.lists(st.sampled_from(sorted(fields)), max_size=3)):
        fields[name] = draw(_FIELD_VALUE)
    return fields


_PAIRS = _corpus()[:6]


@given(_result_fields())
@settings(max_examples=600, deadline=None)
def test_engine_made_equals_the_guard_it_replaces(fields: dict[str, Any]) -> None:
    assert engine_made(fields, pipeline._RESULT_TYPE_PAIRS) is _reference_engine_made(fields)


def test_engine_made_needs_every_field() -> None:
    spec, bundle = _PAIRS[0]
    made = run_pipeline(spec, bundle)
    fields = {name: getattr(made, name) for name in pipeline.PipelineResult.model_fields}
    assert engine_made(fields, pipeline._RESULT_TYPE_PAIRS)
    for name in ("trace", "step_hashes", "evaluation_variables"):
        with pytest.raises(KeyError):
            engine_made(
                {key: value for key, value in fields.items() if key != name}, pipeline._RESULT_TYPE_PAIRS
            )
