"""Attack probes of round 14's unvalidated constructors, biased to reach their fast paths.

``roots_model`` and ``challenge_ref`` build models without validation when every value is one
validation would store as it is. Here the inputs start valid (so most examples take the fast path)
and then get at most two hostile changes: key orders other than the declared one, ``str``/``int``
subclasses, bools, uppercase or padded hex, huge and negative ints, lone surrogates. Each result
must equal the validating constructor's in every observable: values, ``__dict__`` order and types,
``model_fields_set``, JSON and errors."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.commitments import roots_model
from engine.judge.rules import challenge_ref
from engine.schemas import ChallengeRef, PoRRoots

_HASHES = ("prompt_spec_hash", "evidence_root", "reasoning_root", "verdict_hash", "por_root")
_COUNTS = ("evidence_leaf_count", "reasoning_leaf_count")
_KINDS = ("evidence_leaf", "reasoning_leaf", "verdict_hash", "por_bundle", "provenance_tier")


class _Str(str):
    pass


class _Int(int):
    pass


_LOWER = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64).map(lambda d: "0x" + d)
_HOSTILE_HASH = st.one_of(
    _LOWER.map(_Str),
    _LOWER.map(str.upper),
    _LOWER.map(lambda h: "0x" + h[2:].upper()),
    _LOWER.map(lambda h: h + "\n"),
    _LOWER.map(lambda h: " " + h),
    _LOWER.map(lambda h: h[:-1] + "\u0661"),
    _LOWER.map(lambda h: h[:-1] + "\uff10"),
    _LOWER.map(str.encode),
    st.sampled_from([None, 0, "", "0x"]),
)
_HOSTILE_COUNT = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(0, 3).map(_Int),
    st.sampled_from([True, False, 1.0, -0.0, "1", None, 2**64, 10**300]),
)


def _observed(build: Any, values: dict[str, Any]) -> Any:
    try:
        made = build(dict(values))
    except Exception as exc:
        errors = exc.errors(include_url=False) if hasattr(exc, "errors") else str(exc)
        return "error", type(exc).__name__, repr(errors)
    try:
        text = made.model_dump_json()
    except Exception as exc:
        text = type(exc).__name__
    return (
        made.model_dump(),
        list(made.__dict__),
        [type(value) for value in made.__dict__.values()],
        made.model_fields_set,
        made.__pydantic_extra__,
        text,
    )


@st.composite
def _near_valid_roots(draw: Any) -> dict[str, Any]:
    names = list(draw(st.permutations(_HASHES + _COUNTS)))
    values = {name: draw(st.integers(0, 2**70) if name in _COUNTS else _LOWER) for name in names}
    for _ in range(draw(st.integers(0, 2))):
        name = draw(st.sampled_from(names))
        values[name] = draw(_HOSTILE_COUNT if name in _COUNTS else _HOSTILE_HASH)
    return values


@given(_near_valid_roots())
@settings(max_examples=800, deadline=None)
def test_roots_model_near_valid_equals_the_validating_constructor(values: dict[str, Any]) -> None:
    assert _observed(roots_model, values) == _observed(lambda v: PoRRoots(**v), values)


_HOSTILE_TEXT = st.one_of(
    st.text(max_size=4),
    st.text(max_size=3).map(_Str),
    st.sampled_from(["\ud800", "\udfff x", "", "évidence"]),
)


@st.composite
def _near_valid_challenges(draw: Any) -> dict[str, Any]:
    values: dict[str, Any] = {"kind": draw(st.sampled_from(_KINDS))}
    for name in draw(
        st.lists(st.sampled_from(["leaf_index", "evidence_id", "step_id", "reason"]), unique=True)
    ):
        values[name] = draw(st.integers(-(2**70), 2**70)) if name == "leaf_index" else draw(_HOSTILE_TEXT)
    if draw(st.booleans()):
        values = dict(reversed(list(values.items())))
    if draw(st.integers(0, 3)) == 0:
        name = draw(st.sampled_from(sorted(values)))
        values[name] = draw(st.one_of(_HOSTILE_COUNT, _HOSTILE_TEXT, st.sampled_from(_KINDS).map(_Str)))
    return values


@given(_near_valid_challenges())
@settings(max_examples=800, deadline=None)
def test_challenge_ref_near_valid_equals_the_validating_constructor(values: dict[str, Any]) -> None:
    assert _observed(challenge_ref, values) == _observed(lambda v: ChallengeRef(**v), values)
