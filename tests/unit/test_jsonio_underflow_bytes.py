"""``loads_strict``'s underflow check on bytes (the decoder's path) answers exactly as the check on
their decoded text does: its markers are ASCII, and in UTF-8 an ASCII byte is always that character."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import engine.jsonio as now

_UNDERFLOW_TEXT = st.text(
    alphabet=st.sampled_from(list("0123456789eE-+. \u00e9\u0660\U0001f600\ud7ff")), max_size=40
)


@given(_UNDERFLOW_TEXT, st.sampled_from([b"[0.0]", b'{"a":-0.0}', b"[1.5]", b'["0.0 x"]', b"10.0"]))
@settings(max_examples=1500, deadline=None)
def test_the_underflow_check_on_bytes_answers_as_on_their_text(text: str, encoded: bytes) -> None:
    """The bytes check needs no decoded str: the same answer, non-ASCII digits (U+0660) included."""
    raw = text.encode("utf-8")
    assert now._may_underflow_bytes(raw, encoded) == now._may_underflow(text, encoded)
    assert now._may_underflow_bytes(raw + b"0" * 300, b"[0.0]") == now._may_underflow(
        text + "0" * 300, b"[0.0]"
    )
