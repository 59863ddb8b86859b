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
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # no UTC instant in years 1..9999: not a time
        return None


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


def test_a_time_whose_utc_instant_is_out_of_range_is_not_a_time() -> None:
    """A hostile edge offset in an evidence value must not raise (the audit would fail and the bundle
    be dead-lettered); like any other string that names no UTC instant it is not a time."""
    assert parse_time("0001-01-01T00:00:00+01:00") is None
    assert parse_time("9999-12-31T23:30:00-01:00") is None
    assert parse_time("0001-01-01T01:00:00+01:00") == datetime(1, 1, 1, tzinfo=UTC)


def test_a_bundle_with_such_a_time_in_an_evidence_value_is_audited() -> None:
    import json
    from pathlib import Path

    from engine.envelope import decode_envelope, wrap_inputs
    from engine.pipeline import run_pipeline

    doc = json.loads(
        (Path(__file__).resolve().parents[2] / "samples/corpus/01_clean_threshold.json").read_text()
    )
    item = doc["evidence_bundle"]["items"][0]
    item["parsed_value"]["timestamp"] = item["extracted_fields"]["timestamp"] = "0001-01-01T00:00:00+01:00"
    decoded = decode_envelope(json.dumps(wrap_inputs(doc["prompt_spec"], doc["evidence_bundle"])).encode())
    result = run_pipeline(decoded.envelope.prompt_spec, decoded.envelope.evidence_bundle)
    assert result.verdict.outcome == "YES"
