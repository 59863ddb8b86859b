"""The entries' COPY bytes made before the lock are psycopg's own, row for row (ledger.store.copy_text)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg._copy_base import format_row_text
from psycopg.adapt import Transformer

from ledger.errors import InvalidDraftError
from ledger.store.copy_text import copy_field, entries_copy_data, entries_template, text_array

SID = "0x" + "1" * 64
HASH = "0x" + "2" * 64

# every character PostgreSQL text can hold (no U+0000, no lone surrogate), the COPY specials often
_CHARS = st.one_of(
    st.sampled_from("\b\t\n\v\f\r\\%\"'{},\x7f\x1f é\u2028\U0001f600"),
    st.characters(min_codepoint=1, max_codepoint=0x10FFFF, exclude_categories=("Cs",)),
)
_TEXT = st.text(_CHARS, max_size=20)
_STEP = st.tuples(st.integers(0, 2**31 - 1), _TEXT, _TEXT, st.lists(_TEXT, max_size=3), _TEXT, _TEXT)


def _psycopg_rows(first: int, version: str, entries: list[tuple[Any, ...]], steps: dict[int, Any]) -> bytes:
    """What ``copy.write_row`` wrote for the same rows (the append path before copy_text)."""
    tx, out = Transformer(), bytearray()
    for position, entry in enumerate(entries):
        step = steps.get(position)
        body = (None,) * 6 if step is None else (*step[:3], text_array(step[3], "x"), *step[4:])
        format_row_text((first + position, SID, *entry, version, *body), tx, out)
    return bytes(out)


def _assert_template_is_psycopgs(first: int, version: str, rows: list[tuple[str, str, Any]]) -> None:
    """Entries ``(kind, payload, step or None)``: the filled template equals psycopg's rows."""
    entries = [(i + 1, kind, text, HASH, HASH, HASH) for i, (kind, text, _) in enumerate(rows)]
    steps = {i: step for i, (_, _, step) in enumerate(rows) if step is not None}
    template = entries_template(SID, version, entries, steps)
    assert entries_copy_data([(first, template, len(entries))]) == _psycopg_rows(
        first, version, entries, steps
    )


@given(
    first=st.integers(1, 2**62),
    version=_TEXT,
    rows=st.lists(st.tuples(_TEXT, _TEXT, st.one_of(st.none(), _STEP)), min_size=1, max_size=6),
)
@settings(max_examples=400, deadline=None)
def test_the_template_filled_in_is_what_psycopg_writes(
    first: int, version: str, rows: list[tuple[str, str, Any]]
) -> None:
    _assert_template_is_psycopgs(first, version, rows)


# backslashes and "%" but no control character: the light escaping pass (JSON text holds "\\"
# for every quote or newline in a string, so real payloads take it)
_LIGHT_TEXT = st.text(st.sampled_from('\\%"ab{}:, é\u2028'), max_size=20)
_LIGHT_STEP = st.tuples(
    st.integers(0, 2**31 - 1),
    _LIGHT_TEXT,
    _LIGHT_TEXT,
    st.lists(_LIGHT_TEXT, max_size=3),
    _LIGHT_TEXT,
    _LIGHT_TEXT,
)


@given(
    first=st.integers(1, 2**62),
    version=_LIGHT_TEXT,
    rows=st.lists(
        st.tuples(_LIGHT_TEXT, _LIGHT_TEXT, st.one_of(st.none(), _LIGHT_STEP)), min_size=1, max_size=6
    ),
)
@settings(max_examples=300, deadline=None)
def test_backslashes_and_percents_alone_are_written_as_psycopg_writes_them(
    first: int, version: str, rows: list[tuple[str, str, Any]]
) -> None:
    _assert_template_is_psycopgs(first, version, rows)


def test_one_control_character_anywhere_escapes_every_value_fully() -> None:
    """A backslash in one payload and a newline in another step: both escaped, nothing doubled twice."""
    entries = [(1, "k", '{"a":"x\\"y%"}', HASH, HASH, HASH), (2, "trace.step", "{}", HASH, HASH, HASH)]
    steps = {1: (0, "s\n1", "t", ["e\\1"], HASH, '{"q":"\\\\"}')}
    template = entries_template(SID, "v%1", entries, steps)
    assert entries_copy_data([(7, template, 2)]) == _psycopg_rows(7, "v%1", entries, steps)


def test_two_submissions_follow_each_other() -> None:
    one = entries_template(SID, "v", [(1, "a", "{}", HASH, HASH, HASH)], {})
    two = entries_template(
        SID, "v%d", [(1, "b\\", "%s", HASH, HASH, HASH), (2, "c", "x", HASH, HASH, HASH)], {}
    )
    expected = _psycopg_rows(7, "v", [(1, "a", "{}", HASH, HASH, HASH)], {}) + _psycopg_rows(
        8, "v%d", [(1, "b\\", "%s", HASH, HASH, HASH), (2, "c", "x", HASH, HASH, HASH)], {}
    )
    assert entries_copy_data([(7, one, 1), (8, two, 2)]) == expected
    assert entries_template(SID, "v", [], {}) == b""


@pytest.mark.parametrize(
    ("where", "value", "path"),
    [
        ("kind", "a\x00b", "entries[0].kind"),
        ("payload", '{"a":"\x00"}', "entries[0].payload"),
        ("version", "1\x00", "engine_version"),
        ("step_id", "s\x00", "steps[3].step_id"),
        ("step_type", "\x00", "steps[3].step_type"),
        ("evidence", "e\x00", "steps[3].evidence_ids"),
        ("canonical_step", "{\x00}", "steps[3].canonical_step"),
        ("kind", None, "entries[0].kind"),
        ("step_id", 5, "steps[3].step_id"),
    ],
)
def test_text_postgresql_cannot_hold_is_refused_with_its_path(where: str, value: Any, path: str) -> None:
    """psycopg refuses U+0000 when dumping (DataError); the draft is refused before the lock instead."""
    given = {"kind": "ok", "payload": "{}", "version": "v", "step_id": "s", "step_type": "t", "evidence": "e"}
    given["canonical_step"] = "{}"
    given[where] = value
    kind, payload, version = given["kind"], given["payload"], given["version"]
    step = (3, given["step_id"], given["step_type"], [given["evidence"]], HASH, given["canonical_step"])
    entries = [(1, kind, payload, HASH, HASH, HASH), (2, "trace.step", "{}", HASH, HASH, HASH)]
    with pytest.raises(InvalidDraftError) as info:
        entries_template(SID, version, entries, {1: step})
    assert info.value.field_path == path
    if isinstance(value, str):
        with pytest.raises(psycopg.DataError):
            _psycopg_rows(1, version, entries, {1: step})


@pytest.mark.parametrize("surrogate_in", ["kind", "payload", "canonical_step"])
def test_a_lone_surrogate_is_refused_with_its_entry(surrogate_in: str) -> None:
    entries = [
        (1, "k\ud800" if surrogate_in == "kind" else "k", "{}", HASH, HASH, HASH),
        (2, "trace.step", "\udfff" if surrogate_in == "payload" else "{}", HASH, HASH, HASH),
    ]
    step = (0, "s", "t", [], HASH, "{\ud800}" if surrogate_in == "canonical_step" else "{}")
    with pytest.raises(InvalidDraftError) as info:
        entries_template(SID, "v", entries, {1: step})
    assert info.value.field_path == ("entries[0]" if surrogate_in == "kind" else "entries[1]")
    with pytest.raises(UnicodeEncodeError):
        _psycopg_rows(1, "v", entries, {1: step})


def test_a_step_index_must_be_an_int() -> None:
    for index in (True, "3", 3.0):
        with pytest.raises(InvalidDraftError, match="integer"):
            entries_template(
                SID, "v", [(1, "trace.step", "{}", HASH, HASH, HASH)], {0: (index, "s", "t", [], HASH, "{}")}
            )


def test_copy_field_escapes_what_psycopg_escapes() -> None:
    assert copy_field("a\\b\tc\nd\re\bf\vg\fh%", "x") == "a\\\\b\\tc\\nd\\re\\bf\\vg\\fh%"
    assert copy_field("plain é", "x") == "plain é"
