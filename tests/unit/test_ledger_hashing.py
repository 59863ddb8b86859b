"""The ledger's hash definitions (docs/event-store.md §3), pinned by known answers."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from enum import Enum

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.canonical import CanonicalizationError, dumps_canonical, hash_canonical, to_hex
from ledger.store.hashing import (
    GENESIS_PREV_HASH,
    canonical_text,
    chain_hashes,
    entry_hash,
    entry_hash_reference,
    merkle_leaf_data,
    payload_hash,
    step_hash,
    submission_header,
    submission_id_for,
)


class Color(Enum):
    RED = "red"


STREAM = "0x" + "1" * 64
PAYLOAD = "0x" + "2" * 64
PREIMAGE = (
    '{"engine_version":"1.0.0","kind":"submission.received","payload_hash":"'
    + PAYLOAD
    + '","prev_hash":"'
    + GENESIS_PREV_HASH
    + '","stream_id":"'
    + STREAM
    + '","stream_seq":1}'
)


def test_genesis_prev_hash_is_0x_and_64_zeros() -> None:
    assert GENESIS_PREV_HASH == "0x" + "0" * 64


def test_entry_hash_is_sha256_of_the_canonical_preimage() -> None:
    expected = "0x" + hashlib.sha256(PREIMAGE.encode()).hexdigest()
    assert expected == "0x786da6231fd26e3f6a4dbfaf5009f76b0d45f3892bb61c467de26b5fcf5f2df1"
    assert entry_hash(STREAM, 1, "submission.received", PAYLOAD, GENESIS_PREV_HASH, "1.0.0") == expected
    assert (
        entry_hash_reference(STREAM, 1, "submission.received", PAYLOAD, GENESIS_PREV_HASH, "1.0.0")
        == expected
    )


@pytest.mark.parametrize("version", ["1.0.0", 'v"2\\ü\n', "é\u2028x"])
@pytest.mark.parametrize("seq", [1, 7, 2**40])
def test_fast_entry_hash_matches_the_reference_definition(version: str, seq: int) -> None:
    args = (STREAM, seq, "trace.step", PAYLOAD, "0x" + "3" * 64, version)
    assert entry_hash(*args) == entry_hash_reference(*args)


def test_entry_hash_rejects_non_int_sequence() -> None:
    with pytest.raises(TypeError):
        entry_hash(STREAM, True, "trace.step", PAYLOAD, GENESIS_PREV_HASH, "1.0.0")


def test_payload_hash_is_hash_canonical_of_the_payload() -> None:
    payload = {"b": [1, 1.0, None], "a": {"z": None, "y": "ü"}}
    assert payload_hash(dumps_canonical(payload)) == to_hex(hash_canonical(payload))
    assert payload_hash(dumps_canonical({"x": 1})) != payload_hash(dumps_canonical({"x": 1.0}))


def test_chain_links_each_entry_to_the_previous_hash() -> None:
    chain = chain_hashes(STREAM, [("submission.received", PAYLOAD, "1"), ("trace.step", PAYLOAD, "1")])
    (seq1, prev1, hash1), (seq2, prev2, hash2) = chain
    assert (seq1, prev1, seq2, prev2) == (1, GENESIS_PREV_HASH, 2, hash1)
    assert hash2 == entry_hash(STREAM, 2, "trace.step", PAYLOAD, hash1, "1")


def test_submission_id_commits_to_every_header_field() -> None:
    base = {
        "idempotency_key": "k",
        "market_id": "m",
        "bundle_id": None,
        "input_hashes": {"a": "0x01"},
        "status": "audited",
    }
    reference = submission_id_for(submission_header(**base))  # type: ignore[arg-type]
    assert reference == "0x6856ba6786b6652798a521213e35244d0e769a4096873c7a879e5d1acb611774"
    for field, other in [
        ("idempotency_key", "k2"),
        ("market_id", "m2"),
        ("bundle_id", "b"),
        ("input_hashes", {"a": "0x02"}),
        ("status", "rejected"),
    ]:
        assert submission_id_for(submission_header(**{**base, field: other})) != reference  # type: ignore[arg-type]


def test_step_hash_and_merkle_leaf_data() -> None:
    assert step_hash('{"step_id":"s"}') == "0x" + hashlib.sha256(b'{"step_id":"s"}').hexdigest()
    assert merkle_leaf_data(PAYLOAD) == bytes.fromhex("2" * 64)
    with pytest.raises(ValueError):
        merkle_leaf_data("0x1234")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=5) | st.integers(-3, 3), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_fast_canonical_text_equals_the_engine_canonicaliser(value: object) -> None:
    try:
        expected = dumps_canonical(value)
    except CanonicalizationError as exc:
        with pytest.raises(CanonicalizationError) as raised:
            canonical_text(value)
        assert raised.value.path == exc.path
        return
    assert canonical_text(value) == expected


def test_canonical_text_defers_models_and_datetimes_to_the_engine() -> None:
    value = {"when": datetime(2026, 1, 1, tzinfo=UTC), "kind": Color.RED, "n": None, "f": 1.0}
    assert (
        canonical_text(value)
        == dumps_canonical(value)
        == '{"f":1.0,"kind":"red","when":"2026-01-01T00:00:00Z"}'
    )
