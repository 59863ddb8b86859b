"""``ledger verify``'s fast paths give exactly what the ledger's and engine's definitions give."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.canonical import to_hex
from engine.merkle import cournot_root
from ledger.store.hashing import canonical_text, entry_hash, submission_header, text_sha256
from ledger.verify.canonical_form import MISSING, cournot_root_hex, top_level_value
from ledger.verify.checks import _entry_hash, _evidence_ids_written, _header_text, _plain, _text_sha256
from ledger.verify.source import EntryRow, StepRow, SubmissionGroup, steps_of


def _hex(n: int) -> str:
    return "0x" + hashlib.sha256(str(n).encode()).hexdigest()


@pytest.mark.parametrize("count", [0, 1, 2, 3, 5, 8, 13, 64, 100])
def test_cournot_root_hex_is_the_engine_root(count: int) -> None:
    leaves = [_hex(n) for n in range(count)]
    assert cournot_root_hex(leaves) == to_hex(cournot_root([bytes.fromhex(v[2:]) for v in leaves]))


def test_cournot_root_hex_refuses_what_the_engine_refuses() -> None:
    with pytest.raises(ValueError):
        cournot_root_hex([_hex(1), "0x" + "ab" * 31])
    with pytest.raises(ValueError):
        cournot_root_hex([_hex(1), "0x" + "zz" * 32])


@pytest.mark.parametrize(
    ("kind", "version", "prev"),
    [
        ("trace.step", "1.2.3", _hex(7)),
        ('we"ird', "1.2.3", _hex(7)),
        ("trace.step", "v\\1\n", _hex(7)),
        ("trace.step", "1.2.3", "not\x01hex"),
        ("trace.step", "é✓", _hex(7)),
    ],
)
def test_entry_hash_built_at_once_is_the_ledger_entry_hash(kind: str, version: str, prev: str) -> None:
    entry = EntryRow(5, _hex(1), 3, kind, _hex(2), prev, _hex(3), version, "{}")
    assert _entry_hash(_hex(1), entry, _hex(2)) == entry_hash(_hex(1), 3, kind, _hex(2), prev, version)


@pytest.mark.parametrize("kind", ["trace.step", 'we"ird', "v\\1\n"])
def test_entry_hash_with_hashes_proven_plain_is_the_ledger_entry_hash(kind: str) -> None:
    entry = EntryRow(5, _hex(1), 3, kind, _hex(2), _hex(7), _hex(3), "1.2.3", "{}")
    assert _entry_hash(_hex(1), entry, _hex(2), True) == entry_hash(
        _hex(1), 3, kind, _hex(2), _hex(7), "1.2.3"
    )


_ESCAPED = re.compile(r'["\\\x00-\x1f]')  # what a JSON string escapes (ledger.store.hashing's rule)


@given(st.text())
@example('a"b')
@example("a\\b")
@example("\x00")
@example("\x1f")
@example("\ud800")
@example("\x7f\xa0\u2028")
def test_plain_text_needs_no_escape(text: str) -> None:
    if _plain(text):  # True only when nothing in it is escaped; False decides nothing
        assert _ESCAPED.search(text) is None
    if text.isascii() and _ESCAPED.search(text) is None and "\x7f" not in text:
        assert _plain(text)  # the ledger's own texts take the fast path


def _group(input_hashes: str, **fields: str | None) -> SubmissionGroup:
    values: dict[str, str | None] = {"idempotency_key": "k-1", "market_id": "m-1", "bundle_id": "b-1"}
    values.update(fields)
    return SubmissionGroup(
        submission_id="",
        idempotency_key=str(values["idempotency_key"]),
        market_id=values["market_id"],
        bundle_id=values["bundle_id"],
        status="audited",
        input_hashes_canonical=input_hashes,
        engine_version="1",
        entries=(),
        steps=(),
    )


@pytest.mark.parametrize(
    "group",
    [
        _group('{"evidence_root":"0xab","prompt_spec_hash":"0xcd"}'),
        _group('{"a":1}', market_id=None),
        _group("{}", bundle_id=None, market_id=None),
        _group('{"a":[1,2,{"b":"c"}]}', idempotency_key="ké✓"),
    ],
)
def test_header_built_around_the_stored_text_is_the_canonical_header(group: SubmissionGroup) -> None:
    built = _header_text(group)
    assert built is not None
    header = submission_header(
        idempotency_key=group.idempotency_key,
        market_id=group.market_id,
        bundle_id=group.bundle_id,
        input_hashes=built[1],
        status=group.status,
    )
    assert built[0] == canonical_text(header) and text_sha256(built[0]) == text_sha256(canonical_text(header))


@pytest.mark.parametrize(
    "group",
    [
        _group('{"b":1,"a":2}'),  # not sorted
        _group('{"a": 1}'),  # not compact
        _group('{"a":null}'),  # a None member: the general path decides
        _group('{"x":1e-5}'),  # a float orjson may write unlike the canonical form
        _group("[1]"),  # not an object
        _group("{"),  # not JSON
        _group('{"a":1}', idempotency_key='k"1'),  # needs an escape
        _group('{"a":1}', market_id="m\n"),
    ],
)
def test_header_fast_path_leaves_everything_else_to_the_general_path(group: SubmissionGroup) -> None:
    assert _header_text(group) is None


def _step_entry(seq: int, index: int | None, kind: str = "trace.step", text: str | None = "{}") -> EntryRow:
    body = (index, f"s{index}", "t", [], _hex(seq), text) if index is not None else (None,) * 6
    return EntryRow(seq, _hex(1), seq, kind, _hex(2), _hex(3), _hex(4), "1", "{}", *body)


def test_steps_of_keeps_complete_trace_step_bodies_in_step_index_order() -> None:
    entries = [
        _step_entry(1, None, kind="submission.received"),
        _step_entry(2, 2),
        _step_entry(3, 0),
        _step_entry(4, 1, text=None),  # an incomplete body: no step (named step_row_missing)
        _step_entry(5, 0),  # a repeated index keeps stream order
        _step_entry(6, 9, kind="audit.completed"),  # a body on another kind: the ledger-wide check's
    ]
    steps = steps_of(entries)
    assert [(step.global_seq, step.step_index) for step in steps] == [(3, 0), (5, 0), (2, 2)]
    assert all(
        isinstance(step, StepRow) and tuple(step) == tuple(entries[step.global_seq - 1]) for step in steps
    )


_BODY_VALUES = st.none() | st.integers(0, 3) | st.text(max_size=2) | st.lists(st.text(max_size=1), max_size=1)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["trace.step", "submission.received", "verdict.issued"]),
            st.tuples(*[_BODY_VALUES] * 5),
            st.none() | st.integers(0, 3),
        ),
        max_size=8,
    )
)
def test_steps_of_the_driver_rows_are_the_steps_of_their_entry_rows(
    rows: list[tuple[str, tuple[Any, ...], int | None]],
) -> None:
    """The steps made from the driver's rows (plain tuples) are those made from their EntryRows, and
    those of the definition: trace.step entries with no None in their body columns, by step_index."""
    raw = [
        (seq, _hex(1), seq, kind, _hex(2), _hex(3), _hex(4), "1", "{}", index, *body)
        for seq, (kind, body, index) in enumerate(rows, start=1)
    ]
    entries = [EntryRow(*row) for row in raw]
    expected = sorted(
        (row for row in entries if row.kind == "trace.step" and None not in row[9:]), key=lambda row: row[9]
    )
    for given_rows in (raw, entries):
        steps = steps_of(given_rows)
        assert all(type(step) is StepRow for step in steps)
        assert [tuple(step) for step in steps] == [tuple(row) for row in expected]


_STEP_TEXTS = [
    '{"action":"a","evidence_ids":["e1","e2"],"inputs":{}}',
    '{"action":"a","evidence_ids":["e1","e2"]}',
    '{"action":"a","evidence_ids":["e1"],"inputs":{"evidence_ids":["e1","e2"]}}',
    '{"action":"a","evidence_ids":["e1","e2"]x',
    '{"action":"a","evidence_ids":["e1","e2","e3"],"inputs":{}}',
    '{"action":"a","evidence_ids":["e\\"1"],"inputs":{}}',
    '{"action":"a\\"","evidence_ids":["e1","e2"],"inputs":{}}',
    '{"action":"a","evidence_ids":[],"inputs":{}}',
    '{"action":"a","evidence_ids":null,"inputs":{}}',
    '{"action":"a","inputs":{"evidence_ids":["e1","e2"]}}',
    '{"a":{"action":"a","evidence_ids":["e1","e2"]}}',
    '{"action":"a","evidence_ids":["e1","e2"],"evidence_ids":["x"]}',
    "[1]",
]
_COLUMNS: list[object] = [["e1", "e2"], ["e1"], ['e1","e2'], ['e"1'], [], None, ["e1", None], ("e1", "e2")]


@pytest.mark.parametrize("text", _STEP_TEXTS)
@pytest.mark.parametrize("column", _COLUMNS)
def test_evidence_ids_fast_path_agrees_with_the_general_path(text: str, column: object) -> None:
    try:
        value = top_level_value(text, "evidence_ids")
    except ValueError:
        general = False
    else:
        found = () if value is MISSING or value is None else tuple(value)
        general = found == tuple(column or ())  # type: ignore[call-overload]
    if _evidence_ids_written(text, column):  # the fast path may only ever say "they match"
        assert general


def test_evidence_ids_fast_path_takes_the_engine_s_steps() -> None:
    assert _evidence_ids_written('{"action":"a","evidence_ids":["e1","e2"],"inputs":{}}', ["e1", "e2"])
    assert not _evidence_ids_written('{"action":"a","evidence_ids":["e1","e2"],"inputs":{}}', ['e1","e2'])


class _Id(str):
    """A str subclass among the evidence ids."""


_ID = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["e1", "e2", 'e"1', "e\\1", "e\x00", "\ud800", "\u00e9", 'e1","e2', "1.0", "-0"]),
)


@settings(max_examples=500, deadline=None)
@given(
    action=st.one_of(st.sampled_from(["extract", 'a"', "a\\", "\x1f", "\ud800"]), st.text(max_size=5)),
    written=st.lists(_ID, max_size=4),
    column=st.one_of(st.none(), st.lists(st.one_of(_ID, _ID.map(_Id), st.integers()), max_size=4)),
    tail=st.sampled_from(["}", ',"inputs":{}}', ',"evidence_ids":["x"]}', "]", "x", ""]),
)
def test_evidence_ids_fast_path_never_says_match_where_the_general_path_does_not(
    action: str, written: list[str], column: list[Any] | None, tail: str
) -> None:
    ids = "[" + ",".join(f'"{value}"' for value in written) + "]"
    for text in (
        f'{{"action":"{action}","evidence_ids":{ids}{tail}',
        f'{{"action":"{action}","evidence_ids":{ids}',
    ):
        try:
            value = top_level_value(text, "evidence_ids")
            found = () if value is MISSING or value is None else tuple(value)
            general = found == tuple(column or ())
        except (ValueError, TypeError):
            general = False
        if _evidence_ids_written(text, column):
            assert general, (text, column)
    if column == written and written and all(type(v) is str for v in written):  # the engine's own steps
        plain = all(_plain(v) for v in [action, *written])
        assert _evidence_ids_written(f'{{"action":"{action}","evidence_ids":{ids}}}', column) == plain


@given(st.text())
@example("\ud800")  # a lone surrogate: no UTF-8 form, refused by both
@example('{"a":"\u00e9\u4e2d\U0001f600"}')
def test_the_checks_text_hash_is_the_ledger_text_hash(text: str) -> None:
    try:
        expected = text_sha256(text)
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            _text_sha256(text)
        return
    assert _text_sha256(text) == expected
