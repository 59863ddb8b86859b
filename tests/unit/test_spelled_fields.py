"""The spelled fields (:func:`engine.canonical_models.spelled_fields`): a model's fields with the values
:func:`~engine.canonical_models.json_ready` refuses written by ``repr_floats``.

:func:`~engine.canonical_models.model_bytes` and :func:`engine.commitments.bundle_canonical` read a
model holding a ``None`` inside a dict or a float orjson may spell unlike ``repr`` from its fields
instead of dumping it. The bytes must equal the reference serialiser's for every generated model
(hostile values included) or the path must decline; it must agree with :func:`ready_fields` wherever
that one reads; and the decoder's item bytes now come for bundles holding such floats too.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings

from engine.canonical import _dumps_reference, canonical_bytes
from engine.canonical_models import model_bytes, ready_dump_bytes, ready_fields, spelled_fields
from engine.commitments import bundle_canonical
from engine.jsonio import loads_strict
from engine.schemas import EvidenceBundle, PromptSpec
from tests.golden.regenerate import CORPUS_DIR
from tests.unit.test_canonical_models import _Doc, _Leaf, docs

WHEN = datetime(2026, 1, 1, tzinfo=UTC)


class _Str(str):
    pass


class _Int(int):
    pass


class _Dict(dict[str, Any]):
    pass


def _reference(value: Any) -> bytes:
    return _dumps_reference(value).encode("utf-8")


def _check(doc: _Doc) -> bytes | None:
    """The spelled bytes of ``doc``, asserted equal to the reference whenever they are made."""
    fields = spelled_fields(doc)
    ready = ready_fields(doc)
    if ready is not None:
        assert fields == ready  # nothing to spell: the very same values
    spelled = None if fields is None else ready_dump_bytes(fields)
    try:
        expected = _reference(doc)
    except ValueError:  # a lone surrogate: the reference refuses it, and so must every path
        assert spelled is None
        with pytest.raises(ValueError):
            canonical_bytes(doc)
        return None
    assert spelled in (None, expected)
    assert model_bytes(doc) in (None, expected)
    assert canonical_bytes(doc) == expected
    return spelled


@given(docs)
@settings(max_examples=1500, deadline=None)
def test_spelled_fields_give_the_reference_bytes_or_decline(doc: _Doc) -> None:
    _check(doc)


HOSTILE: list[Any] = [
    {"a": None},
    {"a": {"b": None, "c": [None, {"d": None}]}},
    [1e-05, None, -0.0, 1e308, 5e-324, 1e15, 1e16, 999999999999999.9],
    {"x": [-1.5e-07, 0.0, None, 1e300]},
    {"nul\x00": "\x00", "small": 1e-7},
    {"a": None, "s": "\ud800"},
    {"a": None, "big": 2**64},
    {"a": None, "big": -(2**200)},
    {"a": None, 1: "non-str key"},
    {"a": None, "t": (1, 2)},
    {"a": None, "n": float("nan")},
    {"a": None, "i": float("inf")},
    {"a": None, "m": _Leaf(name="model in Any")},
    {"a": None, "d": datetime(2026, 1, 1)},
    {"a": None, "d": datetime(999, 1, 1, tzinfo=UTC)},
    {"a": None, "d": WHEN},
    {"a": None, "s": _Str("sub")},
    {"a": None, "i": _Int(3)},
    {"a": None, "d": _Dict(x=1)},
    _Dict(a=None),
    [_Str("x"), 1e-05],
    {"a": None, "b": b"bytes"},
]


@pytest.mark.parametrize("payload", HOSTILE)
def test_hostile_payloads_give_the_reference_bytes_or_decline(payload: Any) -> None:
    _check(_Doc(label="x", when=WHEN, payload=payload, extra={"e": payload}))
    _check(
        _Doc.model_construct(label="x", when=WHEN, count=0, ratio=1e-9, leaves=[], payload=payload, extra={})
    )


def test_what_the_reference_needs_decides_is_declined() -> None:
    for payload in ({"a": None, "m": _Leaf(name="x")}, {"a": None, "t": (1,)}, {"a": None, 1: "k"}):
        assert spelled_fields(_Doc(label="x", when=WHEN, payload=payload)) is None
    for payload in ({"a": None, "s": _Str("x")}, {"a": None, "i": _Int(1)}, _Dict(a=None)):
        assert spelled_fields(_Doc.model_construct(label="x", when=WHEN, payload=payload)) is None


def test_none_in_dicts_and_small_floats_are_read_from_the_fields() -> None:
    doc = _Doc(
        label="x",
        when=WHEN,
        ratio=1e-05,
        payload={"a": None, "b": [None, 1e-7]},
        leaves=[_Leaf(name="l", weight=1e20)],
    )
    assert ready_fields(doc) is None
    assert _check(doc) == _reference(doc)


def test_deep_nesting_declines_or_matches() -> None:
    deep: Any = None
    for _ in range(5000):
        deep = {"a": deep, "b": None}
    doc = _Doc.model_construct(label="x", when=WHEN, count=0, ratio=1.0, leaves=[], payload=deep, extra={})
    assert spelled_fields(doc) is None or ready_dump_bytes(spelled_fields(doc) or {}) is None


def test_every_corpus_model_is_read_from_its_fields() -> None:
    """Corpus specs, bundles and items (some holding floats like 1.234e-05): all read, all exact."""
    total = 0
    for path in sorted(CORPUS_DIR.glob("*.json")):
        document = loads_strict(path.read_bytes())
        bundle = EvidenceBundle.model_validate(document["evidence_bundle"])
        for model in [PromptSpec.model_validate(document["prompt_spec"]), bundle, *bundle.items]:
            fields = spelled_fields(model)
            assert fields is not None
            assert ready_dump_bytes(fields) == _reference(model)
            total += 1
    assert total > 50


def test_bundles_with_small_floats_carry_their_item_bytes() -> None:
    spelled = 0
    for path in sorted(CORPUS_DIR.glob("*.json")):
        document = loads_strict(path.read_bytes())
        bundle = EvidenceBundle.model_validate(document["evidence_bundle"])
        whole, items = bundle_canonical(bundle)
        assert whole == _reference(bundle)
        assert items is not None
        assert items.preimages_for(bundle) == tuple(_reference(item) for item in bundle.items)
        spelled += ready_fields(bundle) is None
    assert spelled >= 2  # the corpus has bundles only the spelled path reads
