"""``model_bytes`` (now read from the spelled fields) at the edges of orjson's float spelling.

Floats just inside and outside ``1e-3 <= |x| < 1e15`` (where orjson and ``repr`` may spell
differently), subnormals, the largest finite float, -0.0, and ``1e16``/``1e21``/``1e22``/
``123456789012345680.0``, in a float field, inside dicts holding None, inside lists inside dicts,
and alone as an ``Any`` payload: the bytes equal the reference serialiser's (never declined here),
whichever engine build is loaded.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from engine.canonical import _dumps_reference, canonical_bytes
from engine.canonical_models import model_bytes, spelled_fields
from tests.unit.test_canonical_models import _Doc

WHEN = datetime(2026, 1, 1, tzinfo=UTC)
FLOATS = [
    1e-7,
    5e-324,
    -0.0,
    0.0,
    1e16,
    123456789012345680.0,
    1e15,
    -1e15,
    999999999999999.9,
    0.001,
    0.0009999999999999998,
    -1e-3,
    1.7976931348623157e308,
    2.2250738585072014e-308,
    1e22,
    1e21,
    1e-5,
    0.1,
    100.0,
]


def _payloads(number: float) -> list[Any]:
    return [
        {"x": number, "n": None},
        [number, None, {"a": None, "b": [number, None]}],
        {"d": {"e": [None, number]}},
        number,
    ]


@pytest.mark.parametrize("number", FLOATS)
def test_float_edges_give_the_reference_bytes(number: float) -> None:
    for payload in _payloads(number):
        doc = _Doc(label="x", when=WHEN, payload=payload, extra={"e": payload}, ratio=number)
        expected = _dumps_reference(doc).encode("utf-8")
        assert spelled_fields(doc) is not None
        assert model_bytes(doc) == expected
        assert canonical_bytes(doc) == expected
