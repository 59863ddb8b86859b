"""The compiled Cournot root fold (:mod:`engine.merkle.cournot_fold`) against the level-by-level rule."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.merkle import cournot_root
from engine.merkle.cournot import cournot_proof, cournot_root_with_count
from engine.merkle.cournot_fold import require_leaves


def _reference_root(leaves: list[bytes]) -> bytes:
    """Cournot's rule written out: duplicate the last node of odd levels, hash pairs, repeat."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    level = list(leaves)
    while len(level) > 1:
        if len(level) % 2:
            level = [*level, level[-1]]
        level = [hashlib.sha256(level[i] + level[i + 1]).digest() for i in range(0, len(level), 2)]
    return level[0]


LEAVES = st.lists(st.binary(min_size=32, max_size=32), max_size=40)


@settings(max_examples=300, deadline=None)
@given(LEAVES)
def test_the_fold_equals_the_reference(leaves: list[bytes]) -> None:
    before = list(leaves)
    assert cournot_root(leaves) == _reference_root(leaves)
    assert cournot_root(tuple(leaves)) == _reference_root(leaves)
    assert leaves == before  # the caller's list is never padded in place
    assert cournot_root_with_count(leaves).leaf_count == len(leaves)
    if leaves:
        assert cournot_proof(leaves, len(leaves) - 1).root == _reference_root(leaves)


def test_a_single_leaf_is_its_own_root_and_the_empty_tree_hashes_nothing() -> None:
    leaf = bytes(range(32))
    assert cournot_root([leaf]) is leaf
    assert cournot_root([]) == hashlib.sha256(b"").digest()


@pytest.mark.parametrize(
    "bad",
    [b"short", b"x" * 33, "a" * 32, bytearray(32), 32, None, memoryview(bytes(32))],
)
def test_a_leaf_that_is_not_32_bytes_is_a_value_error_naming_it(bad: object) -> None:
    leaves: list[object] = [bytes(32), bytes(32), bad]
    with pytest.raises(ValueError, match=r"^leaf 2 must be 32 bytes$"):
        cournot_root(leaves)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^leaf 2 must be 32 bytes$"):
        require_leaves(leaves)  # type: ignore[arg-type]
