"""``engine.canonical_models``: a model's canonical bytes in one dump equal the reference bytes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from enum import Enum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from engine.canonical import _dumps_reference, canonical_bytes
from engine.canonical_models import json_ready, model_bytes, ready_dump, ready_dump_bytes, ready_fields
from engine.jsonio import loads_strict
from engine.schemas import EvidenceBundle, PromptSpec
from tests.golden.regenerate import CORPUS_DIR


class _Color(Enum):
    RED = "red"


class _Leaf(BaseModel):
    name: str
    at: datetime | None = None
    weight: float | None = None


class _Doc(BaseModel):
    label: str
    when: datetime
    count: int = 0
    ratio: float = 1.0
    leaves: list[_Leaf] = Field(default_factory=list)
    payload: Any = None
    extra: dict[str, Any] = Field(default_factory=dict)


def _reference(value: Any) -> bytes:
    return _dumps_reference(value).encode("utf-8")


text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=10)
floats = st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True) | st.sampled_from(
    [0.0, -0.0, 1e-3, 0.00099, 1e15, 999999999999999.9, 1e-05, 1e16, 95000.0]
)
zones = st.sampled_from(
    [UTC, timezone(timedelta(0)), timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=9))]
)
datetimes = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.one_of(st.none(), zones)
)
payloads = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | floats
    | text
    | datetimes
    | st.just(_Color.RED)
    | st.binary(max_size=3),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(text, children, max_size=3) | st.tuples(children)
    ),
    max_leaves=12,
)
leaves = st.builds(_Leaf, name=text, at=st.none() | datetimes, weight=st.none() | floats)
docs = st.builds(
    _Doc,
    label=text,
    when=datetimes,
    count=st.integers(min_value=-(2**66), max_value=2**66),
    ratio=floats,
    leaves=st.lists(leaves, max_size=3),
    payload=payloads,
    extra=st.dictionaries(text, payloads, max_size=3),
)


@given(docs)
@settings(max_examples=1500, deadline=None)
def test_model_bytes_equal_the_reference_or_decline(doc: _Doc) -> None:
    fast = model_bytes(doc)
    assert fast is None or fast == _reference(doc)
    assert canonical_bytes(doc) == _reference(doc)


@given(st.datetimes(min_value=datetime(1000, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)))
@settings(max_examples=500, deadline=None)
def test_utc_datetimes_from_year_1000_take_the_fast_path(when: datetime) -> None:
    doc = _Doc(label="x", when=when)
    assert model_bytes(doc) == _reference(doc)


@pytest.mark.parametrize(
    "payload",
    [
        (1, 2),
        _Color.RED,
        b"\x01",
        {1: "a"},
        datetime(999, 1, 1, tzinfo=UTC),
        datetime(2026, 1, 1),
        datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=1))),
        2**64,
        "\ud800",
    ],
)
def test_values_orjson_could_write_otherwise_decline(payload: Any) -> None:
    doc = _Doc(label="x", when=datetime(2026, 1, 1, tzinfo=UTC), payload=payload)
    assert model_bytes(doc) is None
    try:
        expected = _reference(doc)
    except ValueError:  # the lone surrogate: refused by both paths
        with pytest.raises(ValueError):
            canonical_bytes(doc)
    else:
        assert canonical_bytes(doc) == expected


@pytest.mark.parametrize(
    "payload", [{"a": None}, [1e-05], [1e16], {"x": [-1.5e-07, 0.0, None, 1e300]}, [5e-324, -1e15]]
)
def test_none_in_dicts_and_floats_orjson_spells_otherwise_are_written_as_the_reference(payload: Any) -> None:
    doc = _Doc(label="x", when=datetime(2026, 1, 1, tzinfo=UTC), payload=payload)
    assert model_bytes(doc) == _reference(doc)


def test_json_ready_accepts_plain_json_only() -> None:
    assert json_ready({"a": [1, "b", True, None, 0.5, {"c": 2.0}]})
    assert not json_ready({"a": None})
    assert not json_ready([float("nan")])
    assert not json_ready({"a": (1,)})


def test_corpus_inputs_take_the_fast_path() -> None:
    """The validated inputs of every corpus bundle: fast bytes, equal to the reference."""
    paths = sorted(CORPUS_DIR.glob("*.json"))
    assert paths
    taken = 0
    for path in paths:
        document = loads_strict(path.read_bytes())
        spec = PromptSpec.model_validate(document["prompt_spec"])
        bundle = EvidenceBundle.model_validate(document["evidence_bundle"])
        for model in [spec, bundle, *bundle.items]:
            fast = model_bytes(model)
            assert canonical_bytes(model) == _reference(model)
            if fast is not None:
                assert fast == _reference(model)
                taken += 1
    assert taken >= 3 * len(paths)  # every spec and bundle and item, but a few holding small floats


@pytest.mark.parametrize("extra", ["allow", "ignore", "forbid"])
def test_extras_set_by_hand_are_canonicalised_as_the_model_dump_does(extra: str) -> None:
    from pydantic import ConfigDict

    from engine.canonical import _canonicalize_reference, canonicalize_value

    class _Open(BaseModel):
        model_config = ConfigDict(extra=extra)  # type: ignore[typeddict-item]
        name: str = "n"
        inner: _Leaf | None = None

    for extras in (None, {}, {"x": 1, "y": None}):
        model = _Open(inner=_Leaf(name="a", weight=0.5))
        object.__setattr__(model, "__pydantic_extra__", extras)
        assert canonicalize_value(model) == _canonicalize_reference(model)
        assert canonicalize_value({"m": [model]}) == _canonicalize_reference({"m": [model]})


def _dump(model: BaseModel) -> Any:
    return model.model_dump(mode="python", by_alias=True, exclude_none=True)


class _SubLeaf(_Leaf):
    secret: str = "dropped by the declared schema"


@given(docs)
@settings(max_examples=1500, deadline=None)
def test_ready_fields_equal_the_ready_dump_or_decline(doc: _Doc) -> None:
    """Read from the fields: the dump itself (and so the same bytes), or None."""
    fields = ready_fields(doc)
    if fields is not None:
        assert fields == _dump(doc)
        assert json_ready(fields)
        assert ready_dump_bytes(fields) in (None, _reference(doc))  # None: an int beyond 64 bits
    assert ready_dump(doc) in (None, _dump(doc))


def test_corpus_inputs_are_read_from_their_fields() -> None:
    """Every corpus spec, bundle and item: fields read equal to the dump, and read at all for most."""
    read = total = 0
    for path in sorted(CORPUS_DIR.glob("*.json")):
        document = loads_strict(path.read_bytes())
        bundle = EvidenceBundle.model_validate(document["evidence_bundle"])
        for model in [PromptSpec.model_validate(document["prompt_spec"]), bundle, *bundle.items]:
            total += 1
            fields = ready_fields(model)
            if fields is not None:
                assert fields == _dump(model)
                assert ready_dump_bytes(fields) == _reference(model)
                read += 1
    assert read >= total - 10  # all but those holding small floats


def test_ready_fields_decline_what_the_dump_decides() -> None:
    when = datetime(2026, 1, 1, tzinfo=UTC)
    # a subclass in a model-typed field: pydantic dumps it by the declared class
    sub = _Doc.model_construct(label="x", when=when, leaves=[_SubLeaf(name="a")], extra={}, payload=None)
    assert ready_fields(sub) is None
    assert canonical_bytes(sub) == _reference(sub)
    # a model where the field is typed Any; a None inside a dict; a tuple
    for payload in (_Leaf(name="a"), {"a": None}, (1,)):
        doc = _Doc(label="x", when=when, payload=payload)
        assert ready_fields(doc) is None
        assert canonical_bytes(doc) == _reference(doc)
    # a field missing from __dict__, and a key in __dict__ that is not a field
    partial = _Doc.model_construct(label="x")
    assert ready_fields(partial) is None
    stray = _Doc(label="x", when=when)
    stray.__dict__["stray"] = 1
    assert ready_fields(stray) is None
    assert canonical_bytes(stray) == _reference(stray)
    # a model whose dump is not its fields
    aliased = _Aliased(value="v")
    assert ready_fields(aliased) is None
    assert canonical_bytes(aliased) == _reference(aliased) == b'{"v-alias":"v"}'


class _Aliased(BaseModel):
    value: str = Field(serialization_alias="v-alias")


def test_canonicalize_value_ignores_a_stray_dict_entry_as_the_dump_does() -> None:
    from engine.canonical import _canonicalize_reference, canonicalize_value

    doc = _Doc(label="x", when=datetime(2026, 1, 1, tzinfo=UTC), leaves=[_Leaf(name="a")])
    doc.__dict__["stray"] = {"b": None}
    assert "stray" not in canonicalize_value(doc)
    assert canonicalize_value(doc) == _canonicalize_reference(doc)
    del doc.__dict__["count"]  # a field missing (and as many entries as fields): the reference decides
    assert canonicalize_value(doc) == _canonicalize_reference(doc)
