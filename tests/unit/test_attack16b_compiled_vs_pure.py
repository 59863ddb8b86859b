"""Round 16's compiled functions (``chain_entries``, ``fold_leaves``) against their own pure source,
loaded beside them in one process, on hostile values: non-str kinds and versions (int, bool, huge
int, float, None, list, an int subclass that prints otherwise), str subclasses that compare equal to
anything, NUL, lone surrogates, float-looking strings; leaves that are bytes subclasses, bytearrays,
short. The same values or the same refusal (exception type) in both; ``prepare`` refuses a non-str
engine_version with the same error in both builds.
"""

from __future__ import annotations

import importlib.util
import itertools
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger.store.chain_text as chain_text
import ledger.translog.leaf_fill as leaf_fill
from ledger.errors import InvalidDraftError
from ledger.store.append import prepare
from ledger.store.records import EntryDraft, SubmissionDraft

ROOT = Path(__file__).resolve().parents[2]


def _source(name: str, relative: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PURE_CHAIN = _source("attack16b_pure_chain_text", "ledger/store/chain_text.py")
PURE_FILL = _source("attack16b_pure_leaf_fill", "ledger/translog/leaf_fill.py")
STREAM = "0x" + "1" * 64


class _Eq(str):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__

    def __str__(self) -> str:
        return "zz"


class _Int(int):
    def __str__(self) -> str:
        return "7"

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        return "7"


_VALUES: list[Any] = [
    "trace.step", "a\x00", "\ud800", _Eq("k"), _Eq("\ud800"), 5, _Int(5), True, 1.5, float("nan"),
    10**400, None, ["x"], {"a": 1}, b"x", "1e400", "-0", "é\u2028",
]  # fmt: skip
_TEXTS: list[Any] = ["{}", "\ud800", _Eq("{}"), "\x00", '{"a":"\\u0000"}']


def _outcome(fn: Any, *args: Any) -> Any:
    try:
        return "ok", fn(*args)
    except Exception as exc:  # the refusal's type is what is compared
        return "refused", type(exc).__name__


@pytest.mark.parametrize("version", _VALUES, ids=repr)
def test_chain_entries_compiled_equals_its_source(version: Any) -> None:
    for kind, text in itertools.product(_VALUES, _TEXTS):
        args = (STREAM, version, [kind, "trace.step"], [text, "{}"])
        assert _outcome(chain_text.chain_entries, *args) == _outcome(PURE_CHAIN.chain_entries, *args)


@settings(max_examples=200, deadline=None)
@given(
    size=st.integers(0, 70_000),
    count=st.integers(0, 600),
    bad=st.sampled_from([None, "short", "bytearray", "subclass", "str"]),
)
def test_fold_leaves_compiled_equals_its_source(size: int, count: int, bad: str | None) -> None:
    leaves: list[Any] = [i.to_bytes(32, "big") for i in range(count)]

    class _Bytes(bytes):
        pass

    if bad is not None and leaves:
        leaves[-1] = {
            "short": b"x" * 31,
            "bytearray": bytearray(32),
            "subclass": _Bytes(32),
            "str": "x" * 32,
        }[bad]
    roots = [bytes([n]) * 32 for n in range(bin(size).count("1"))]
    compiled = _outcome(leaf_fill.fold_leaves, list(roots), size, list(leaves), 1 << 63)
    pure = _outcome(PURE_FILL.fold_leaves, list(roots), size, list(leaves), 1 << 63)
    assert compiled == pure
    full = _outcome(leaf_fill.fold_leaves, list(roots), size, list(leaves), size + count // 2)
    assert full == _outcome(PURE_FILL.fold_leaves, list(roots), size, list(leaves), size + count // 2)


_DRAFT = SubmissionDraft(
    "k", "m", "b", {"raw_sha256": "0x00"}, "rejected", [EntryDraft("submission.rejected", {})], [], None, "1"
)


@pytest.mark.parametrize("version", [7, _Int(7), True, 1.5, 10**400, ["1"], b"1"], ids=repr)
def test_a_non_str_engine_version_is_an_invalid_draft_in_both_builds(version: Any) -> None:
    with pytest.raises(InvalidDraftError, match="engine_version"):
        replace(_DRAFT, engine_version=version)


def test_a_str_subclass_engine_version_hashes_as_its_characters() -> None:
    class _Version(str):
        def __str__(self) -> str:
            return "9.9.9"

    assert prepare(replace(_DRAFT, engine_version=_Version("1"))).entries == prepare(_DRAFT).entries
