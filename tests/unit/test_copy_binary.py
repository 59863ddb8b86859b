"""The entries' binary COPY bytes made before the lock are psycopg's own, row for row
(ledger.store.copy_binary), and refuse what the text format refuses (ledger.store.copy_text)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg._copy_base import format_row_binary
from psycopg.adapt import PyFormat, Transformer
from psycopg.pq import Format

from ledger.errors import InvalidDraftError
from ledger.store import copy_binary, copy_text

SID = "0x" + "1" * 64
HASH = "0x" + "2" * 64
OTHER = "0x" + "3" * 64
# int8, text, int4, text x 6, int4, text, text, text[], text, text: ENTRY_WRITE_COLUMNS + STEP_WRITE_COLUMNS
OIDS = [20, 25, 23, 25, 25, 25, 25, 25, 25, 23, 25, 25, 1009, 25, 25]

_CHARS = st.one_of(
    st.sampled_from("\b\t\n\v\f\r\\%\"'{},\x7f\x1f é\u2028\U0001f600\xff"),
    st.characters(min_codepoint=1, max_codepoint=0x10FFFF, exclude_categories=("Cs",)),
)
_TEXT = st.text(_CHARS, max_size=20)
_STEP = st.tuples(st.integers(-(2**31), 2**31 - 1), _TEXT, _TEXT, st.lists(_TEXT, max_size=3), _TEXT, _TEXT)


def _psycopg_rows(first: int, version: str, entries: list[tuple[Any, ...]], steps: dict[int, Any]) -> bytes:
    """What ``copy.write_row`` writes for the same rows in ``FORMAT BINARY`` with ``set_types``."""
    tx, out = Transformer(), bytearray(copy_binary.SIGNATURE)
    tx.set_dumper_types(OIDS, Format.BINARY)
    for position, entry in enumerate(entries):
        step = steps.get(position)
        body = (None,) * 6 if step is None else (*step[:3], list(step[3]), *step[4:])
        format_row_binary((first + position, SID, *entry, version, *body), tx, out)
    return bytes(out + copy_binary.TRAILER)


def _entries(rows: list[tuple[str, str, Any]], chained: bool) -> list[tuple[Any, ...]]:
    """``(stream_seq, kind, text, payload_hash, prev_hash, entry_hash)``; ``chained``: each prev_hash
    is the previous entry_hash (as the ledger makes them), else unrelated."""
    out: list[tuple[Any, ...]] = []
    for i, (kind, text, _) in enumerate(rows):
        current = f"0x{i + 1:064x}"
        prev = out[-1][5] if chained and out else OTHER
        out.append((i + 1, kind, text, HASH, prev, current))
    return out


@given(
    first=st.integers(1, 2**62),
    version=_TEXT,
    rows=st.lists(st.tuples(_TEXT, _TEXT, st.one_of(st.none(), _STEP)), min_size=1, max_size=6),
    chained=st.booleans(),
)
@settings(max_examples=400, deadline=None)
def test_the_rows_with_their_positions_are_what_psycopg_writes(
    first: int, version: str, rows: list[tuple[str, str, Any]], chained: bool
) -> None:
    entries = _entries(rows, chained)
    steps = {i: step for i, (_, _, step) in enumerate(rows) if step is not None}
    template = copy_binary.entries_template(SID, version, entries, steps)
    data = copy_binary.entries_copy_data([(first, template, len(entries))])
    assert data == _psycopg_rows(first, version, entries, steps)


def test_two_submissions_follow_each_other_and_long_values_keep_their_length() -> None:
    long_text = "é" * 5000  # 10,000 bytes: past the precomputed length words
    one = copy_binary.entries_template(SID, "v", [(1, "a", long_text, HASH, HASH, HASH)], {})
    two = copy_binary.entries_template(
        SID, "v", [(1, "b", "{}", HASH, HASH, HASH), (2, "trace.step", "x", HASH, HASH, HASH)],
        {1: (0, "s", "t", ["e" * 5000, ""], HASH, "{}")},
    )  # fmt: skip
    expected = (
        _psycopg_rows(7, "v", [(1, "a", long_text, HASH, HASH, HASH)], {})[:-2]
        + _psycopg_rows(
            8,
            "v",
            [(1, "b", "{}", HASH, HASH, HASH), (2, "trace.step", "x", HASH, HASH, HASH)],
            {1: (0, "s", "t", ["e" * 5000, ""], HASH, "{}")},
        )[len(copy_binary.SIGNATURE) :]
    )
    assert copy_binary.entries_copy_data([(7, one, 1), (8, two, 2)]) == expected
    assert copy_binary.entries_template(SID, "v", [], {}) == ()
    with pytest.raises(ValueError):
        copy_binary.entries_copy_data([(7, one, 2)])


_REFUSED = [
    ("kind", "a\x00b"),
    ("payload", '{"a":"\x00"}'),
    ("version", "1\x00"),
    ("step_id", "s\x00"),
    ("step_type", "\x00"),
    ("evidence", "e\x00"),
    ("canonical_step", "{\x00}"),
    ("kind", None),
    ("payload", 5),
    ("step_id", 5),
    ("step_type", None),
    ("evidence", 7),
    ("canonical_step", ["x"]),
    ("kind", "k\ud800"),
    ("payload", "\udfff"),
    ("version", "\ud800"),
    ("canonical_step", "{\ud800}"),
    ("evidence", "\udc00"),
    ("step_index", True),
    ("step_index", "3"),
    ("step_index", 3.0),
]


@pytest.mark.parametrize(("where", "value"), _REFUSED)
def test_what_the_text_format_refuses_is_refused_with_its_error_and_path(where: str, value: Any) -> None:
    given = {"kind": "ok", "payload": "{}", "version": "v", "step_id": "s", "step_type": "t", "evidence": "e"}
    given.update(canonical_step="{}", step_index=3)
    given[where] = value
    step = (given["step_index"], given["step_id"], given["step_type"], [given["evidence"]], HASH,
            given["canonical_step"])  # fmt: skip
    entries = [
        (1, given["kind"], given["payload"], HASH, HASH, HASH),
        (2, "trace.step", "{}", HASH, HASH, HASH),
    ]
    args: tuple[Any, ...] = (SID, given["version"], entries, {1: step})
    with pytest.raises(InvalidDraftError) as text_refusal:
        copy_text.entries_template(*args)
    with pytest.raises(InvalidDraftError) as binary_refusal:
        copy_binary.entries_template(*args)
    assert binary_refusal.value.field_path == text_refusal.value.field_path
    assert binary_refusal.value.message == text_refusal.value.message


@pytest.mark.parametrize("index", [2**31, -(2**31) - 1, 10**40])
def test_a_step_index_beyond_postgresql_integer_is_refused(index: int) -> None:
    with pytest.raises(InvalidDraftError, match="integer") as info:
        copy_binary.entries_template(
            SID, "v", [(1, "trace.step", "{}", HASH, HASH, HASH)], {0: (index, "s", "t", [], HASH, "{}")}
        )
    assert info.value.field_path == f"steps[{index}].step_index"


class _Str(str):
    """A str subclass: written as its characters, or refused, as the text format does."""


def test_a_str_subclass_is_refused_where_the_text_format_refuses_it() -> None:
    """The text format refuses a str subclass when some value needs escaping (a newline here)."""
    entries = [(1, _Str("k"), "{\n}", HASH, HASH, HASH)]
    with pytest.raises(InvalidDraftError) as text_refusal:
        copy_text.entries_template(SID, "v", entries, {})
    with pytest.raises(InvalidDraftError) as binary_refusal:
        copy_binary.entries_template(SID, "v", entries, {})
    assert binary_refusal.value.field_path == text_refusal.value.field_path


def test_pyformat_is_binary_for_every_column() -> None:
    """The reference above dumps with the columns' own types (what ``set_types`` makes psycopg do)."""
    tx = Transformer()
    tx.set_dumper_types(OIDS, Format.BINARY)
    dumped = tx.dump_sequence((1, SID, 1, "k", "{}", HASH, HASH, HASH, "v", 0, "s", "t", ["e"], HASH, "{}"),
                              [PyFormat.BINARY] * 15)  # fmt: skip
    assert dumped[0] == (1).to_bytes(8, "big") and dumped[2] == (1).to_bytes(4, "big")


def test_a_str_subclass_is_written_as_its_characters_when_the_text_format_writes_it() -> None:
    entries: list[tuple[Any, ...]] = [(1, _Str("k"), _Str("{}"), HASH, HASH, HASH)]
    assert copy_text.entries_template(SID, _Str("v"), entries, {})
    template = copy_binary.entries_template(SID, _Str("v"), entries, {})
    assert copy_binary.entries_copy_data([(3, template, 1)]) == _psycopg_rows(
        3, "v", [(1, "k", "{}", HASH, HASH, HASH)], {}
    )


def test_a_stream_seq_beyond_postgresql_integer_is_refused_not_wrapped() -> None:
    """The ledger numbers entries from 1; a value the int4 column cannot hold is never sent."""
    with pytest.raises(InvalidDraftError):
        copy_binary.entries_template(SID, "v", [(2**31, "k", "{}", HASH, HASH, HASH)], {})
