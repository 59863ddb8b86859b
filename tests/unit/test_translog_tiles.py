"""Tile arithmetic of the stored tree (no database): spans, the right edge, rewritten tiles."""

from __future__ import annotations

import hashlib

import pytest

from engine.merkle.rfc6962 import Frontier, root_from_leaf_hashes
from ledger.translog.tiles import StoredTiles, edge_spans, subtree_span, tile_rows

LEAVES = [hashlib.sha256(i.to_bytes(4, "big")).digest() for i in range(70_000)]


def _tiles_of(size: int) -> dict[int, list[bytes]]:
    """Hashes of tree levels 0, 8, 16, … of the first ``size`` leaves, per tile level."""
    frontier, levels = Frontier(), dict[int, list[bytes]]()
    for value in LEAVES[:size]:
        frontier, completed = frontier.append_with_subtrees(value)
        for subtree in completed:
            height = (subtree.end - subtree.start).bit_length() - 1
            if height % 8 == 0:
                levels.setdefault(height // 8, []).append(subtree.hash)
    return levels


def _stored(size: int) -> StoredTiles:
    rows = tile_rows(0, StoredTiles({}, {}), _tiles_of(size))
    return StoredTiles({(r[0], r[1]): (0, r[3]) for r in rows}, {(r[0], r[1]): r[2] for r in rows})


@pytest.mark.parametrize(
    ("start", "end", "span"),
    [(5, 6, (0, 5, 1)), (128, 256, (0, 128, 128)), (256, 512, (1, 1, 1)), (0, 2**17, (2, 0, 2))],
)
def test_a_perfect_subtree_is_a_run_of_hashes_in_one_tile(
    start: int, end: int, span: tuple[int, ...]
) -> None:
    assert subtree_span(start, end) == span


def test_the_right_edge_is_the_partial_tile_of_each_level() -> None:
    assert edge_spans(0) == []
    assert edge_spans(256) == [(1, 0, 1)]
    assert edge_spans(65_536 + 256 * 3 + 7) == [(0, 256 * 259, 7), (1, 256, 3), (2, 0, 1)]


def test_subtrees_from_tiles_equal_the_reference_roots() -> None:
    stored = _stored(66_000)
    for start, end in [(0, 1), (0, 256), (256, 384), (65_536, 65_792), (0, 65_536), (65_792, 65_800)]:
        assert stored.subtree(start, end) == root_from_leaf_hashes(LEAVES[start:end])
    assert stored.subtree(65_792, 66_048) is None  # beyond the stored partial tile


def test_an_append_rewrites_the_partial_tiles_and_adds_the_filled_ones() -> None:
    size, more = 250, 300
    before, after = _tiles_of(size), _tiles_of(size + more)
    edge = _stored(size)
    appended = {level: after[level][len(before.get(level, [])) :] for level in after}
    rows = tile_rows(size, edge, appended)
    assert [(level, idx, width) for level, idx, width, _ in rows] == [
        (0, 0, 256),
        (0, 1, 256),
        (0, 2, 38),
        (1, 0, 2),
    ]
    assert rows[1][3] == b"".join(LEAVES[256:512])
    assert rows[3][3] == b"".join(after[1])
