"""The log check appends whole tiles at once: the same frontier and stored-node list as leaf by leaf
(a whole tile's leaves are noted as one item, compared with the stored tile at once)."""

from __future__ import annotations

import hashlib

import pytest

from engine.merkle.rfc6962 import root_from_leaf_hashes
from ledger.translog.verify import TILE_WIDTH, _Node, _Scan, _tile_root, _TileLeaves


def _leaves(count: int) -> list[tuple[int, str, bytes]]:
    return [
        (seq, f"sub-{seq // 7}", hashlib.sha256(str(seq).encode()).digest()) for seq in range(1, count + 1)
    ]


def _expanded(completed: list[_Node | _TileLeaves]) -> list[_Node]:
    return [
        node for item in completed for node in (item.nodes() if isinstance(item, _TileLeaves) else [item])
    ]


@pytest.mark.parametrize("stored_size", [0, 300, 700, 5000])
@pytest.mark.parametrize("first_leaves", [0, 5, 256])
def test_tile_appends_match_leaf_appends(stored_size: int, first_leaves: int) -> None:
    leaves = _leaves(1800)
    by_leaf, by_tile = _Scan(stored_size, None), _Scan(stored_size, None)
    nodes_by_leaf: list[_Node | _TileLeaves] = []
    nodes_by_tile: list[_Node | _TileLeaves] = []
    for leaf in leaves:
        by_leaf.append_leaf(*leaf, nodes_by_leaf)
    for leaf in leaves[:first_leaves]:
        by_tile.append_leaf(*leaf, nodes_by_tile)
    by_tile.append(leaves[first_leaves:], nodes_by_tile)
    assert by_tile.frontier == by_leaf.frontier
    assert all(not isinstance(item, _TileLeaves) for item in nodes_by_leaf)
    assert _expanded(nodes_by_tile) == nodes_by_leaf
    assert len(nodes_by_leaf) == min(stored_size, len(leaves)) + min(stored_size, len(leaves)) // TILE_WIDTH


@pytest.mark.parametrize("count", [1, 2, 3, 255, TILE_WIDTH, 257])
def test_a_tile_root_is_the_reference_root(count: int) -> None:
    hashes = [leaf for _, _, leaf in _leaves(count)]
    assert _tile_root(hashes) == root_from_leaf_hashes(hashes)
    hashes[count // 2] = hashes[count // 2][:31]  # not a hash: refused as the reference refuses it
    with pytest.raises(ValueError, match="must be 32 bytes"):
        _tile_root(hashes)
