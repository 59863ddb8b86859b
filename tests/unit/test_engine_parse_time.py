"""``parse_time`` answers for strings exactly as ``datetime.fromisoformat`` would (its early refusal included)."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.auditor.reasoning.values import parse_time


def _reference(value: str) -> datetime | None:
    """The rule without the early refusal: what ``fromisoformat`` accepts with an offset, in UTC."""
    if len(value) > 64 or len(value) < 10:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        return None
    return parsed.astimezone(UTC)


TIMES = [
    "2026-02-01T00:00:00Z",
    " 2026-02-01T00:00:00+02:00\n",
    "20260201T000000Z",
    "2026-W05-1T00:00:00Z",
    "2026-032T10:00:00+00:00",
    "2026-02-01 00:00:00.123456-05:30",
    "\u0662\u0660\u0662\u0666-02-01T00:00:00Z",
    "\u00a02026-02-01T00:00:00Z",
    "+2026-02-01T00:00:00Z",
    "104198.50000000",
    "2026-02-01",
    "SR-CBOE-2025-061",
]


def test_parse_time_matches_the_reference_on_time_like_and_other_strings() -> None:
    from engine.auditor.reasoning import values

    assert values._MAX_TIME_TEXT == 64  # the reference above copies this bound
    for text in TIMES:
        assert parse_time(text) == _reference(text), text
    assert parse_time(TIMES[0]) == datetime(2026, 2, 1, tzinfo=UTC)


@given(st.sampled_from(TIMES), st.text(max_size=8), st.text(max_size=8), st.integers(0, 30))
@settings(max_examples=1500)
def test_parse_time_matches_the_reference_on_mutated_strings(
    base: str, prefix: str, infix: str, at: int
) -> None:
    for text in (prefix + base, base[:at] + infix + base[at:], infix + base[at:]):
        assert parse_time(text) == _reference(text), text
