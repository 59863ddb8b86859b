"""``engine.schemas.utc.to_utc`` as loaded (compiled by mypyc, or the source under
``LEDGER_ENGINE=pure``) against its source run by the interpreter: the same value (type and
``tzinfo`` included) or the same ``ValueError`` message, for any datetime (naive, odd offsets down
to microseconds, year 1 and 9999 at the edges, subclasses, a tzinfo without an offset), and the
same pydantic verdict through ``UtcDatetime``.
"""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

import engine.schemas.utc as loaded
from engine.schemas.common import UtcDatetime


def _source() -> ModuleType:
    path = Path(loaded.__file__).with_name("utc.py")
    spec = importlib.util.spec_from_file_location("attack15_utc_source", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOURCE = _source()


class _NoOffset(tzinfo):
    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return None


class _Sub(datetime):
    pass


class _Model(BaseModel):
    t: UtcDatetime


def _outcome(function: Any, value: datetime) -> tuple[Any, ...]:
    try:
        out = function(value)
    except ValueError as exc:
        return ("refused", str(exc))
    return ("ok", type(out), out, out.tzinfo, out.utcoffset())


ODD = [
    datetime(2026, 1, 1),
    datetime(2026, 1, 1, tzinfo=_NoOffset()),
    datetime(1, 1, 1, tzinfo=timezone(timedelta(microseconds=1))),
    datetime(1, 1, 1, tzinfo=timezone(-timedelta(hours=23, minutes=59))),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone(-timedelta(microseconds=1))),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=23, minutes=59))),
    datetime(2016, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(2026, 3, 29, 1, 30, fold=1, tzinfo=timezone(timedelta(hours=1))),
    _Sub(2026, 1, 1, tzinfo=timezone(timedelta(hours=-3))),
    _Sub(2026, 1, 1),
]


@pytest.mark.parametrize("value", ODD)
def test_odd_datetimes(value: datetime) -> None:
    assert _outcome(loaded.to_utc, value) == _outcome(SOURCE.to_utc, value)


offsets = st.one_of(
    st.none(),
    st.timedeltas(min_value=-timedelta(hours=23, minutes=59), max_value=timedelta(hours=23, minutes=59)).map(
        timezone
    ),
    st.just(UTC),
)


@given(
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59, 999999)), offsets
)
@settings(max_examples=500, deadline=None)
def test_any_datetime(naive: datetime, zone: tzinfo | None) -> None:
    value = naive.replace(tzinfo=zone)
    assert _outcome(loaded.to_utc, value) == _outcome(SOURCE.to_utc, value)
    try:
        model: Any = _Model(t=value).t
    except ValidationError as exc:
        model = [(e["type"], e["msg"]) for e in exc.errors()]
        expected = _outcome(SOURCE.to_utc, value)
        assert expected[0] == "refused" and model == [("value_error", f"Value error, {expected[1]}")]
    else:
        assert ("ok", type(model), model, model.tzinfo, model.utcoffset()) == _outcome(SOURCE.to_utc, value)
