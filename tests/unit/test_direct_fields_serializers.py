"""A model whose fields serialise through their schema (``Annotated`` serializers, ``exclude_if``)
has no direct field plan: the fast paths must write the bytes of its ``model_dump``."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import BaseModel, Field, PlainSerializer

from engine.canonical import _dumps_reference, canonical_bytes, canonicalize_value, dumps_canonical
from engine.canonical_models import direct_fields, model_bytes, ready_dump, ready_fields


class _Upper(BaseModel):
    name: Annotated[str, PlainSerializer(lambda text: text.upper())]


class _Skipped(BaseModel):
    count: int = Field(default=0, exclude_if=lambda number: number == 0)


class _Nested(BaseModel):
    tags: list[Annotated[str, PlainSerializer(lambda text: text.upper())]]


class _Holder(BaseModel):
    inner: _Upper


_CASES = [_Upper(name="abc"), _Skipped(count=0), _Nested(tags=["x", "y"]), _Holder(inner=_Upper(name="q"))]


@pytest.mark.parametrize("model", _CASES, ids=lambda model: type(model).__name__)
def test_schema_serializers_reach_the_bytes(model: BaseModel) -> None:
    """Fails while a fast path reads ``__dict__`` past a serializer the dump applies."""
    reference = _dumps_reference(model).encode()
    assert canonical_bytes(model) == reference
    assert dumps_canonical(model).encode() == reference
    assert model_bytes(model) in (None, reference)
    dumped = model.model_dump(mode="python", by_alias=True, exclude_none=True)
    assert ready_fields(model) in (None, dumped)
    assert ready_dump(model) in (None, dumped)
    assert canonicalize_value(model) == canonicalize_value(dumped)


def test_plain_models_keep_their_plan() -> None:
    """The refusal is only for schema serializers: a plain model still has its field plan."""

    class _Plain(BaseModel):
        name: str
        tags: list[str]

    assert direct_fields(_Plain) == (("name", None), ("tags", None))
    assert direct_fields(_Upper) == ()
    assert direct_fields(_Skipped) == ()
