"""The memoised value helpers (``split_path``, ``format_time``, ``is_time_name``) and ``parse_time``'s UTC fast path
equal their direct computations."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.auditor.reasoning import values
from engine.auditor.reasoning.values import format_time, is_time_name, parse_time, split_path


def _split_direct(path: str) -> tuple[str, ...]:
    return tuple(segment for segment in re.sub(r"\[(\d+)\]", r".\1", path).split(".") if segment)


def _format_direct(moment: datetime) -> str:
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{utc.microsecond:06d}Z" if utc.microsecond else f"{text}Z"


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab.[]01", max_size=12))
def test_split_path_equals_the_direct_split(path: str) -> None:
    assert split_path(path) == _split_direct(path)
    assert split_path(path) == _split_direct(path)  # a memo hit gives the same value


@settings(max_examples=200, deadline=None)
@given(
    st.datetimes(min_value=datetime(1900, 1, 2), max_value=datetime(2200, 1, 1)),
    st.sampled_from([None, UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=8))]),
)
def test_format_time_equals_the_direct_text(moment: datetime, zone: timezone | None) -> None:
    value = moment if zone is None else moment.replace(tzinfo=zone)
    assert format_time(value) == _format_direct(value)
    assert format_time(value) == _format_direct(value)


def test_memos_stay_bounded_and_correct_after_they_fill() -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    for offset in range(values._TIME_TEXTS_LIMIT + 10):
        moment = start + timedelta(seconds=offset)
        assert format_time(moment) == _format_direct(moment)
    assert len(values._TIME_TEXTS) <= values._TIME_TEXTS_LIMIT
    for index in range(values._PATHS_LIMIT + 10):
        path = f"data[{index}].close"
        assert split_path(path) == ("data", str(index), "close")
    assert len(values._PATHS) <= values._PATHS_LIMIT
    # The same instant in another zone is an equal key and has the same UTC text.
    same = start.astimezone(timezone(timedelta(hours=2)))
    assert format_time(same) == format_time(start) == "2024-01-01T00:00:00Z"


def _parse_reference(text: str) -> datetime | None:
    """``parse_time`` of a string before the UTC fast path (every offset read, then converted)."""
    if len(text) < 10 or not (text.strip()[:4].isascii() and text.strip()[:4].isdigit()):
        return None
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        return None
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        return None


_SUFFIXES = st.sampled_from(
    ["Z", "+00:00", "-00:00", "+05:30", "-08:00", "+23:59", "", ".5Z", ".123456+01:00"]
)


@settings(max_examples=300, deadline=None)
@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)), _SUFFIXES)
def test_parse_time_equals_the_reference(moment: datetime, suffix: str) -> None:
    text = moment.replace(microsecond=0).isoformat() + suffix
    made, expected = parse_time(text), _parse_reference(text)
    assert made == expected
    if made is not None and expected is not None:
        assert made.tzinfo is UTC
        assert made.utcoffset() == expected.utcoffset() == timedelta(0)
        assert (made.year, made.hour, made.microsecond) == (
            expected.year,
            expected.hour,
            expected.microsecond,
        )


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=12), st.sampled_from(["closeTime", "as_of", "Updated_AT", "price", "TS", "date"])
    )
)
def test_is_time_name_equals_the_direct_rule(name: str) -> None:
    lowered = name.lower()
    expected = lowered in {
        "timestamp",
        "time",
        "date",
        "datetime",
        "as_of",
        "asof",
        "ts",
    } or lowered.endswith(("_at", "_time", "_timestamp", "_date", "time", "timestamp"))
    assert is_time_name(name) is expected
    assert is_time_name(name) is expected  # a memo hit


def test_is_time_name_memo_stays_bounded() -> None:
    for index in range(values._TIME_NAME_LIMIT + 10):
        assert is_time_name(f"field_{index}_at") is True
    assert len(values._TIME_NAME_ANSWERS) <= values._TIME_NAME_LIMIT
