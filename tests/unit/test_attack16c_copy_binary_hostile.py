"""Attack on ``ledger.store.copy_binary.entries_template`` with hostile values in every field: the
module as loaded (mypyc build, or the source under ``LEDGER_ENGINE=pure``) and its source run by
the interpreter give the same bytes or the same refusal (type, message, path); it refuses exactly
what the text template (``copy_text``) refuses, apart from a ``step_index`` beyond PostgreSQL's
``integer`` (refused here, before the lock; the server refused it in the text format); and a
``str`` subclass it writes is written as its characters, whatever methods it overrides.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.errors import InvalidDraftError
from ledger.store import copy_binary, copy_text


def _source() -> ModuleType:
    path = Path(copy_binary.__file__).with_name("copy_binary.py")
    spec = importlib.util.spec_from_file_location("attack16c_copy_binary_source", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOURCE = _source()
SID = "0x" + "1" * 64
HASH = "0x" + "2" * 64


class Sub(str):
    """A str subclass lying through every method the writers could call."""

    def encode(self, *args: Any, **kwargs: Any) -> bytes:  # type: ignore[override]
        return b"LIE"

    def __str__(self) -> str:
        return "LIE"

    def replace(self, *args: Any, **kwargs: Any) -> str:  # type: ignore[override]
        return "LIE"

    def translate(self, *args: Any) -> str:
        return "LIE"

    def __contains__(self, item: object) -> bool:  # type: ignore[override]
        return False

    def __len__(self) -> int:
        return 0


class IntSub(int):
    def __index__(self) -> int:
        return 7


HOSTILE_TEXT: list[Any] = [
    "",
    "plain",
    "a\x00b",
    "\ud800",
    "ok\udfff",
    "\\%\t",
    Sub("plain"),
    Sub("needs\\escape"),
    Sub("nul\x00"),
    b"bytes",
    None,
    1,
    1.5,
    "\U0001f600" * 3,
    "x" * 5000,
]
HOSTILE_INDEX: list[Any] = [
    0,
    -1,
    2**31 - 1,
    -(2**31),
    2**31,
    -(2**31) - 1,
    2**64,
    True,
    IntSub(3),
    3.0,
    "3",
    None,
]
HOSTILE_EVIDENCE: list[Any] = [
    [],
    ["a"],
    [Sub("a")],
    ["a\x00"],
    ["\ud800"],
    [None],
    [1],
    ["NULL", "", "a,b", '"', "{}", "\\"],
    "abc",
]


def _outcome(function: Any, *args: Any) -> tuple[Any, ...]:
    try:
        return ("ok", function(*args))
    except InvalidDraftError as exc:
        return ("refused", exc.message, exc.field_path)
    except TypeError:  # a non-str engine_version: the compiled signature refuses it (never stored)
        return ("refused", "TypeError", None)


def _calls() -> list[tuple[Any, ...]]:
    """``(version, entries, steps)`` with one hostile value in each field in turn."""
    base_entries = [(1, "kind", "{}", HASH, HASH, HASH), (2, "trace.step", "{}", HASH, HASH, HASH)]
    base_step = (0, "id", "type", ["e"], HASH, "{}")
    calls: list[tuple[Any, ...]] = []
    for value in HOSTILE_TEXT:
        calls.append((value, base_entries, {1: base_step}))
        for field in (1, 2):
            entry = list(base_entries[1])
            entry[field] = value
            calls.append(("v", [base_entries[0], tuple(entry)], {1: base_step}))
        for field in (1, 2, 4, 5):
            step = list(base_step)
            step[field] = value
            calls.append(("v", base_entries, {1: tuple(step)}))
    for index in HOSTILE_INDEX:
        calls.append(("v", base_entries, {1: (index, *base_step[1:])}))
    for ids in HOSTILE_EVIDENCE:
        calls.append(("v", base_entries, {1: (0, "id", "type", ids, HASH, "{}")}))
    return calls


CALLS = _calls()


@pytest.mark.parametrize("call", range(len(CALLS)))
def test_loaded_module_and_source_agree_and_refuse_what_text_refuses(call: int) -> None:
    version, entries, steps = CALLS[call]
    loaded = _outcome(copy_binary.entries_template, SID, version, entries, steps)
    assert loaded == _outcome(SOURCE.entries_template, SID, version, entries, steps)
    text = _outcome(copy_text.entries_template, SID, version, entries, steps)
    index = steps[1][0]
    beyond_int4 = type(index) is int and not -(2**31) <= index < 2**31
    if beyond_int4 and text[0] == "ok":
        assert loaded[0] == "refused" and loaded[2].endswith(".step_index")
    else:
        assert loaded[0] == text[0], (loaded, text)
        if text[0] == "refused":
            assert loaded == text  # the same error and path


def _plain(value: Any) -> Any:
    return str.__str__(value) if isinstance(value, str) else value


@pytest.mark.parametrize("call", range(len(CALLS)))
def test_a_str_subclass_written_is_written_as_its_characters(call: int) -> None:
    version, entries, steps = CALLS[call]
    outcome = _outcome(copy_binary.entries_template, SID, version, entries, steps)
    if outcome[0] != "ok":
        return
    plain_steps = {k: tuple(_plain(v) for v in step) for k, step in steps.items()}
    plain_entries = [tuple(_plain(v) for v in entry) for entry in entries]
    assert outcome[1] == copy_binary.entries_template(SID, _plain(version), plain_entries, plain_steps)
    assert b"LIE" not in b"".join(outcome[1])


@given(
    text=st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=12),
    index=st.one_of(st.integers(-(2**40), 2**40), st.booleans()),
    ids=st.lists(st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=4), max_size=4),
    sub=st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_loaded_and_source_agree_on_any_text(text: str, index: int, ids: list[str], sub: bool) -> None:
    value = Sub(text) if sub else text
    entries = [(1, value, value, HASH, HASH, HASH)]
    steps = {0: (index, value, value, ids, value, value)}
    loaded = _outcome(copy_binary.entries_template, SID, value, entries, steps)
    assert loaded == _outcome(SOURCE.entries_template, SID, value, entries, steps)
    if loaded[0] == "ok":
        assert b"LIE" not in b"".join(loaded[1]) or "LIE" in text
