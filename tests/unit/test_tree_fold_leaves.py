"""The append's compiled tree extension (``fold_leaves``) is ``Frontier.append_with_subtrees``
leaf by leaf, keeping the completed subtrees whose height is a multiple of the tile height."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.merkle.rfc6962 import Frontier, root_from_leaf_hashes
from ledger.translog.leaf_fill import fold_leaves
from ledger.translog.tiles import TILE_HEIGHT


def _leaf(i: int) -> bytes:
    return hashlib.sha256(i.to_bytes(8, "big")).digest()


def _reference(frontier: Frontier, leaves: list[bytes]) -> tuple[Frontier, dict[int, list[bytes]]]:
    appended: dict[int, list[bytes]] = {0: []}
    for value in leaves:
        frontier, completed = frontier.append_with_subtrees(value)
        appended[0].append(value)
        for subtree in completed[1:]:
            height = (subtree.end - subtree.start).bit_length() - 1
            if height % TILE_HEIGHT == 0:
                appended.setdefault(height // TILE_HEIGHT, []).append(subtree.hash)
    return frontier, appended


@settings(max_examples=60, deadline=None)
@given(before=st.integers(0, 70_000), count=st.integers(0, 700))
def test_fold_leaves_is_append_with_subtrees(before: int, count: int) -> None:
    start = Frontier()
    for i in range(before % 300):  # a real right edge for small sizes ...
        start = start.append(_leaf(i))
    if before >= 300:  # ... and a synthetic one (any hashes) for large ones
        start = Frontier(before, tuple(_leaf(10**9 + k) for k in range(bin(before).count("1"))))
    leaves = [_leaf(before + i) for i in range(count)]
    expected_frontier, expected = _reference(start, leaves)
    roots = list(start.subtree_roots)
    assert fold_leaves(roots, start.size, leaves, 2**64 - 1) == expected
    assert Frontier(start.size + count, tuple(roots)) == expected_frontier


def test_a_whole_tile_level_and_the_root() -> None:
    leaves = [_leaf(i) for i in range(256 * 256)]
    roots: list[bytes] = []
    appended = fold_leaves(roots, 0, leaves, 2**64 - 1)
    assert len(appended[0]) == 65536 and len(appended[1]) == 256 and len(appended[2]) == 1
    assert roots == [root_from_leaf_hashes(leaves)] == appended[2]


@pytest.mark.parametrize("bad", [b"x" * 31, b"x" * 33, bytearray(32), "x" * 32, None, memoryview(b"x" * 32)])
def test_a_leaf_that_is_not_32_bytes_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        fold_leaves([], 0, [_leaf(0), bad], 2**64 - 1)


def test_a_full_tree_is_refused() -> None:
    with pytest.raises(ValueError, match="full"):
        fold_leaves([_leaf(0)], 2**64 - 1, [_leaf(1)], 2**64 - 1)
