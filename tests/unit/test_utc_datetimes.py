"""``UtcDatetime``'s validator skips the offset check for pydantic's own parsed offsets, and answers
exactly as the checked reference does for every datetime, parsed or passed in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from pydantic_core import TzInfo

from engine.schemas.common import _to_utc
from engine.schemas.market import ResolutionWindow


def _reference(value: datetime) -> tuple[str, Any]:
    """The validator as it was: the offset checked on every value."""
    try:
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("timestamp has no time zone; send UTC with a 'Z' suffix or an explicit offset")
        return "ok", value.astimezone(UTC)
    except ValueError as exc:
        return "error", str(exc)


def _answer(value: datetime) -> tuple[str, Any]:
    try:
        return "ok", _to_utc(value)
    except ValueError as exc:
        return "error", str(exc)


class _NoOffset(tzinfo):
    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return None


_OFFSETS = st.integers(min_value=-86399, max_value=86399)
_ZONES = st.one_of(
    st.none(),
    st.just(UTC),
    st.just(_NoOffset()),
    _OFFSETS.map(TzInfo),
    st.integers(min_value=-1439, max_value=1439).map(lambda m: timezone(timedelta(minutes=m))),
)


@given(st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 30)), _ZONES, st.booleans())
@settings(max_examples=800)
def test_to_utc_answers_as_the_checked_reference(moment: datetime, zone: tzinfo | None, fold: bool) -> None:
    value = moment.replace(tzinfo=zone, fold=int(fold))
    mine, reference = _answer(value), _reference(value)
    assert mine[0] == reference[0]
    if mine[0] == "ok":
        assert mine[1] == reference[1] and repr(mine[1]) == repr(reference[1])
        assert mine[1].tzinfo is UTC and mine[1].fold == reference[1].fold
    else:
        assert mine[1] == reference[1]


@pytest.mark.parametrize(
    "text",
    ["2026-01-01T00:00:00Z", "2026-01-01T05:30:00+05:30", "2026-01-01T00:00:00-23:59", "2026-01-01T00:00:00"],
)
def test_parsed_timestamps_normalise_or_fail_as_before(text: str) -> None:
    document = {"start": text, "end": "2026-01-02T00:00:00Z"}
    try:
        window = ResolutionWindow.model_validate(document)
    except ValidationError as exc:
        assert "time zone" in str(exc)
        return
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    assert window.start == parsed and window.start.tzinfo is UTC


@pytest.mark.parametrize(
    "text",
    [
        "0001-01-01T00:00:00+01:00",
        "0001-01-01T00:59:59+01:00",
        "9999-12-31T23:00:00-01:00",
        "9999-12-31T23:59:59-00:01",
    ],
)
def test_a_timestamp_whose_utc_instant_is_out_of_range_is_a_validation_error(text: str) -> None:
    """A hostile edge offset must be a field error (a rejection naming the field), not a raw
    OverflowError from ``astimezone`` that the consumer could only report as a decoder bug."""
    with pytest.raises(ValidationError) as caught:
        ResolutionWindow.model_validate({"start": text, "end": "2026-01-02T00:00:00Z"})
    assert "out of range once converted to UTC" in str(caught.value)
    assert caught.value.errors()[0]["loc"] == ("start",)


@pytest.mark.parametrize("text", ["0001-01-01T01:00:00+01:00", "9999-12-31T22:00:00-01:00"])
def test_edge_timestamps_that_stay_in_range_are_accepted(text: str) -> None:
    window = ResolutionWindow.model_validate({"start": text, "end": "9999-12-31T23:59:59Z"})
    assert window.start == datetime.fromisoformat(text) and window.start.tzinfo is UTC
