"""Replay's outcome leaves (``SubmissionReplay.leaf``): orjson's bytes for exact strings equal the
store's canonical text, hostile strings and other values included (the canonical function decides
those, and raises where it raises)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.replay.results import leaf_bytes
from ledger.replay.runner import SubmissionReplay
from ledger.store.hashing import canonical_text


class _Str(str):
    pass


class _Int(int):
    pass


_VALUES = st.one_of(
    st.none(),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())),
    st.sampled_from(["\x00", "\ud800", "a\udfffb", "1e-07", "0.00001", "x\\y", '"', "\u2028", "é"]),
    st.builds(_Str, st.text(max_size=4)),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.builds(_Int, st.integers(-3, 3)),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([-0.0, 1e308, 1e-7, 5e-324]),
    st.booleans(),
    st.lists(st.text(max_size=2), max_size=2),
)
_KEYS = ("por_root", "recorded_engine_version", "status", "submission_id")


def _reference(values: dict[str, Any]) -> bytes | type[Exception]:
    try:
        return canonical_text(values).encode("utf-8")
    except Exception as exc:  # the kind of refusal is compared too
        return type(exc)


@settings(max_examples=500, deadline=None)
@given(st.tuples(*(_VALUES for _ in _KEYS)))
def test_leaf_bytes_equal_the_canonical_text_or_fail_alike(values: tuple[Any, ...]) -> None:
    table = dict(zip(_KEYS, values, strict=True))
    expected = _reference(table)
    if isinstance(expected, bytes):
        assert leaf_bytes(table) == expected
    else:
        with pytest.raises(expected):
            leaf_bytes(table)


def test_a_non_str_key_takes_the_canonical_function() -> None:
    for odd in ({1: "a"}, {_Str("k"): "b", "a": "c"}):
        assert leaf_bytes(odd) == canonical_text(odd).encode("utf-8")
    assert leaf_bytes({"b": "x", "a": None}) == b'{"b":"x"}'


def test_an_outcomes_leaf_is_its_canonical_text() -> None:
    for por_root in (None, "0x" + "ab" * 32):
        item = SubmissionReplay(
            submission_id="0x" + "11" * 32,
            market_id="m",
            first_seq=1,
            status="identical",
            recorded_engine_version="1.0.0",
            steps=6,
            por_root=por_root,
        )
        assert item.leaf() == canonical_text(
            {
                "por_root": por_root,
                "recorded_engine_version": "1.0.0",
                "status": "identical",
                "submission_id": "0x" + "11" * 32,
            }
        ).encode("utf-8")


def test_an_outcome_set_at_once_is_the_constructors_record() -> None:
    """``_outcome`` stores the same fields as ``SubmissionReplay(...)``: equal, hashed, pickled,
    replaced and serialised alike; and its layout check holds for the record as declared."""
    import dataclasses
    import pickle

    from ledger.replay import runner

    assert runner._OUTCOME_LAYOUT_HOLDS
    for por_root, status in ((None, "error"), ("0x" + "ab" * 32, "identical")):
        args = ("0x" + "11" * 32, None, 7, status, "1.0.0", 6, 9, por_root, ())
        made = runner._outcome(*args)  # type: ignore[arg-type]
        built = SubmissionReplay(
            submission_id=args[0],
            market_id=args[1],
            first_seq=args[2],
            status=status,  # type: ignore[arg-type]
            recorded_engine_version=args[4],
            steps=args[5],
            head_stream_seq=args[6],
            por_root=por_root,
            reasoning=(),
        )
        assert type(made) is SubmissionReplay
        assert made == built and hash(made) == hash(built) and made.__dict__ == built.__dict__
        assert list(made.__dict__) == [item.name for item in dataclasses.fields(SubmissionReplay)]
        assert pickle.loads(pickle.dumps(made)) == built
        assert dataclasses.replace(made, error="x") == dataclasses.replace(built, error="x")
        assert made.to_json() == built.to_json() and made.leaf() == built.leaf()
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.status = "diverged"  # type: ignore[misc]
