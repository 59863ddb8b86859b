"""Attack on revision 0012: ``input_hashes_canonical`` is no longer parsed into a stored JSONB
column on append, so PostgreSQL no longer refused a text that ``jsonb`` cannot hold (the escape
``\\u0000``), and one such row made every read of ``ledger.submissions.input_hashes`` fail
("unsupported Unicode escape sequence"). ``prepare`` refuses it (exactly when a key or value holds
U+0000, not for an escaped backslash followed by ``u0000``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.errors import InvalidDraftError
from ledger.store.append import prepare
from tests.helpers.ledger_factories import audited

DRAFT = audited("attack16c-nul", steps=1)


def _with(extra: dict[str, Any]) -> Any:
    return dataclasses.replace(DRAFT, input_hashes={**DRAFT.input_hashes, **extra})


def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_nul(v) for v in value)
    return False


@pytest.mark.parametrize(
    "extra",
    [{"x": "a\x00b"}, {"x\x00": "a"}, {"x": ["ok", {"y": "\x00"}]}, {"x": "\\\x00"}, {"x": "\\\\\x00"}],
)
def test_an_input_hash_holding_nul_is_refused(extra: dict[str, Any]) -> None:
    with pytest.raises(InvalidDraftError) as caught:
        prepare(_with(extra))
    assert caught.value.field_path == "input_hashes"


@pytest.mark.parametrize("extra", [{"x": "\\u0000"}, {"x": "\\\\u0000"}, {"\\u0000": "a"}, {"x": "u0000"}])
def test_an_escaped_backslash_before_u0000_is_kept(extra: dict[str, Any]) -> None:
    text = prepare(_with(extra)).input_hashes_canonical
    assert "u0000" in text and ("\\\\u0000" in text or "\\" not in str(extra))


_TEXT = st.text(st.sampled_from(["\x00", "\\", "u", "0", "a", '"', "\x01"]), max_size=10)


@given(key=_TEXT, value=st.one_of(_TEXT, st.lists(_TEXT, max_size=3)))
@settings(max_examples=300, deadline=None)
def test_refused_exactly_when_a_key_or_value_holds_nul(key: str, value: Any) -> None:
    extra = {f"k{key}": value}
    try:  # refused when the draft is made (its header check) or by prepare: either way, before any write
        prepare(_with(extra))
    except InvalidDraftError as exc:
        assert exc.field_path == "input_hashes" and _holds_nul(extra)
    else:
        assert not _holds_nul(extra)
