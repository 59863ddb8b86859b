"""Attacks on replay's member-by-member text check (``_matches_rebuilt``) and its byte comparisons.

Against the exact definition (the stored UTF-8 bytes equal ``canonical_text(payload)``'s): any
ASCII key (quotes, backslashes, control characters, DEL), None members, nested values, a hashed
member anywhere; and stored texts that differ only in spelling: members reordered, a key repeated,
escaped instead of raw unicode, whitespace, invalid UTF-8 bytes. Both given as bytes and as str.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.replay.identical import _matches_rebuilt, steps_identical
from ledger.store.hashing import canonical_text

_ASCII_KEY = st.text(alphabet=st.characters(max_codepoint=127), max_size=4)
_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=4).filter(lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s)),
    st.sampled_from(["\x00", "\u2028", "é", "\\u0061", '"', "1.0"]),
)
_VALUE = st.recursive(
    _LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_ASCII_KEY, inner, max_size=3)),
    max_leaves=8,
)


def _digest(data: bytes) -> str:
    return "0x" + hashlib.sha256(data).hexdigest()


def _spellings(stored: str) -> list[str]:
    """Texts that differ from ``stored`` (a canonical JSON object) but may parse to the same value."""
    texts = [
        stored + " ",
        " " + stored,
        stored + "\n",
        stored.replace(":", ": ", 1),
        stored.replace(",", ", ", 1),
    ]
    texts.append(stored.replace("a", "\\u0061", 1))
    texts.append(stored.replace("é", "\\u00e9", 1))
    if stored != "{}":
        first_member = stored[1:].split(",", 1)[0].rstrip("}")
        texts.append("{" + first_member + "," + stored[1:])  # a key repeated
    return [text for text in texts if text != stored]


@settings(max_examples=400, deadline=None)
@given(
    payload=st.dictionaries(_ASCII_KEY, _VALUE, max_size=5),
    hashed_at=st.integers(0, 6),
    with_preimage=st.booleans(),
)
def test_member_by_member_matches_exactly_the_canonical_text(
    payload: dict[str, Any], hashed_at: int, with_preimage: bool
) -> None:
    hashed: Any = object()
    keys = sorted(payload)
    if hashed_at < len(keys) and payload[keys[hashed_at]] is not None:
        hashed = payload[keys[hashed_at]] = [payload[keys[hashed_at]]]  # a fresh object: the very one
    member = canonical_text(hashed).encode("utf-8") if isinstance(hashed, list) else b""
    preimage = member if with_preimage else b""
    digest = _digest(member)
    stored = canonical_text(payload)
    for text in (stored, stored.encode("utf-8")):
        assert _matches_rebuilt(text, payload, hashed, digest, preimage)
    for other in _spellings(stored):
        for text in (other, other.encode("utf-8")):
            assert not _matches_rebuilt(text, payload, hashed, digest, preimage), other
    raw = stored.encode("utf-8")
    for broken in (raw + b"\xff", raw[:-1] + b"\xc3}", b"\xed\xa0\x80" + raw):
        assert not _matches_rebuilt(broken, payload, hashed, digest, preimage)


def test_members_in_another_order_or_a_member_replaced_by_its_hash_preimage_elsewhere_do_not_match() -> None:
    verdict = {"outcome": "YES", "p": 1}
    payload = {"market_id": "m", "verdict": verdict, "z": None}
    member = canonical_text(verdict).encode()
    good = canonical_text(payload)
    assert _matches_rebuilt(good, payload, verdict, _digest(member), member)
    for text in (
        '{"verdict":{"outcome":"YES","p":1},"market_id":"m"}',  # members reordered
        '{"market_id":"m","verdict":{"p":1,"outcome":"YES"}}',  # the hashed member's own keys reordered
        '{"market_id":"m","verdict":{"outcome":"YES","p":1},"z":null}',  # a None member written
        '{"market_id":"m","verdict":{"outcome":"YES","p":1} }',
        '{"market_id":"\\u006d","verdict":{"outcome":"YES","p":1}}',
    ):
        assert not _matches_rebuilt(text, payload, verdict, _digest(member), member), text
        assert not _matches_rebuilt(text, payload, verdict, _digest(member), b""), text


class _Step:
    """The two attributes of a pipeline result ``steps_identical`` reads."""

    def __init__(self, texts: list[bytes], preimages: bool) -> None:
        self.step_hashes = [_digest(text) for text in texts]
        self.step_canonical = tuple(texts) if preimages else ()


@pytest.mark.parametrize("preimages", [True, False])
def test_step_texts_as_bytes_match_only_the_very_bytes(preimages: bool) -> None:
    texts = [b'{"action":"a","x":"\xc3\xa9"}', b'{"action":"b"}']
    result: Any = _Step(texts, preimages)
    hashes = result.step_hashes
    assert steps_identical(hashes, texts, result)
    assert steps_identical(hashes, [text.decode() for text in texts], result)
    for changed in (
        [texts[0] + b" ", texts[1]],
        [b'{"action":"a","x":"\\u00e9"}', texts[1]],
        [texts[0][:-3] + b'\xff"}', texts[1]],
        [texts[1], texts[0]],
        [texts[0]],
    ):
        assert not steps_identical(hashes, changed, result)
