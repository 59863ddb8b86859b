"""Attacks on verify16's ``kind_problems`` memo and ``evidence_ids`` fast path.

* The memo past its cap (more than 1,024 distinct sequences), a caller mutating a returned list,
  str subclasses whose ``__eq__``/``__hash__`` claim to be another kind, a kinds iterable that is
  not a list: the results are always :func:`_kind_problems`' own.
* ``evidence_ids`` column values against step texts that spell the same ids otherwise (``\\u0061``
  for ``a``, ``\\/``), hold NUL, lone surrogates, quotes, backslashes, separators inside an id,
  duplicates, non-strings: the fast path says "match" only where the exact path does, and takes
  the engine's own spelling.
"""

from __future__ import annotations

from typing import Any

import pytest

from ledger.verify import kinds as kinds_module
from ledger.verify.canonical_form import MISSING, top_level_value
from ledger.verify.checks import _evidence_ids_written
from ledger.verify.kinds import KIND_ORDER, _kind_problems, kind_problems

_AUDITED = list(KIND_ORDER["audited"])


class _Liar(str):
    """Equal to (and hashed as) every string: a memo keyed on it would answer for any other key."""

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return hash("submission.received")


def test_the_memo_past_its_cap_still_answers_exactly() -> None:
    for n in range(1100):
        sequence = [*_AUDITED[:3], *(["x"] * (n % 7)), f"k{n}"]
        assert kind_problems("audited", sequence) == _kind_problems("audited", sequence)
    assert len(kinds_module._KNOWN) <= kinds_module._KNOWN_KEPT
    for n in (0, 5, 1099):  # remembered or not, the same answers
        sequence = [*_AUDITED[:3], *(["x"] * (n % 7)), f"k{n}"]
        assert kind_problems("audited", sequence) == _kind_problems("audited", sequence)


def test_a_mutated_answer_does_not_change_the_next_one() -> None:
    sequence = ["submission.received", "x"]
    expected = _kind_problems("audited", sequence)
    for _ in range(3):
        answer = kind_problems("audited", sequence)
        assert answer == expected
        answer.clear()
        answer.append(("poisoned", "by a caller"))


def test_a_lying_str_subclass_neither_poisons_nor_reads_the_memo() -> None:
    plain = list(_AUDITED)
    expected_plain = kind_problems("audited", plain)  # remembered
    liar = [_Liar(kind) for kind in ["x", "y"]]
    assert kind_problems("audited", liar) == _kind_problems("audited", liar)
    assert kind_problems(_Liar("audited"), plain) == _kind_problems(_Liar("audited"), plain)
    assert kind_problems("audited", plain) == expected_plain == _kind_problems("audited", plain)


def test_a_tuple_or_generator_free_sequence_gives_the_list_answer() -> None:
    sequence = ["submission.received", "trace.step", "bogus"]
    assert kind_problems("audited", tuple(sequence)) == kind_problems("audited", sequence)
    assert kind_problems("rejected", sequence) == _kind_problems("rejected", sequence)


def _general(text: str, column: Any) -> bool:
    try:
        value = top_level_value(text, "evidence_ids")
        found = () if value is MISSING or value is None else tuple(value)
        return bool(found == tuple(column or ()))
    except (ValueError, TypeError):
        return False


_TEXTS = [
    '{"action":"a","evidence_ids":["\\u0061"]}',
    '{"action":"a","evidence_ids":["a\\/b"]}',
    '{"action":"a","evidence_ids":["a/b"]}',
    '{"action":"a","evidence_ids":["a","a"]}',
    '{"action":"a","evidence_ids":["a"]}',
    '{"action":"a","evidence_ids":["a\\u0000"]}',
    '{"action":"a","evidence_ids":["\\ud800"]}',
    '{"action":"a","evidence_ids":["a\x00"]}',
    '{"action":"a","evidence_ids":["a","b"]}',
    '{"action":"a","evidence_ids":["a\\",\\"b"]}',
    '{"action":"a","evidence_ids":["a", "b"]}',
    '{"action":"a","evidence_ids":[1]}',
    '{"action":"a","evidence_ids":["1"]}',
    '{"action":"a","evidence_ids":["é"]}',
    '{"action":"a","evidence_ids":["\\u00e9"]}',
    '{"action":"\\u0061","evidence_ids":["a"]}',
    '{"action":"a","evidence_ids":["a"]',
    '{"action":"a","evidence_ids":["a"]]',
]
_COLUMNS: list[Any] = [
    ["a"],
    ["a", "a"],
    ["a/b"],
    ["a\x00"],
    ["\ud800"],
    ['a","b'],
    ["a", "b"],
    [1],
    ["1"],
    ["é"],
    [None],
    ["a", None],
    [type("S", (str,), {})("a")],
]


@pytest.mark.parametrize("text", _TEXTS)
@pytest.mark.parametrize("column", _COLUMNS, ids=repr)
def test_the_evidence_ids_fast_path_says_match_only_where_the_exact_path_does(text: str, column: Any) -> None:
    if _evidence_ids_written(text, column):
        assert _general(text, column), (text, column)


def test_the_fast_path_takes_raw_non_ascii_and_duplicate_ids() -> None:
    assert _evidence_ids_written('{"action":"a","evidence_ids":["a","a"]}', ["a", "a"])
    assert _evidence_ids_written('{"action":"a","evidence_ids":["é"]}', ["é"])
    assert not _evidence_ids_written('{"action":"a","evidence_ids":["a","a"]}', ["a"])
    assert not _evidence_ids_written(
        '{"action":"a","evidence_ids":["\\u0061"]}', ["a"]
    )  # the exact path decides
    assert _general('{"action":"a","evidence_ids":["\\u0061"]}', ["a"])
