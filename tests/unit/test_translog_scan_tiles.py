"""The log check appends whole tiles at once: the same frontier and stored-node list as leaf by leaf
(a whole tile's leaves are noted as one item, compared with the stored tile at once)."""

from __future__ import annotations

import hashlib

import pytest

from engine.merkle.rfc6962 import root_from_leaf_hashes
from ledger.translog import leaf_fill
from ledger.translog.scan import HASH_SIZE, TILE_WIDTH, Leaves, Node, Scan, TileLeaves, tile_root


def _leaves(count: int) -> list[tuple[int, str, bytes]]:
    return [
        (seq, f"sub-{seq // 7}", hashlib.sha256(str(seq).encode()).digest()) for seq in range(1, count + 1)
    ]


def _expanded(completed: list[Node | TileLeaves]) -> list[Node]:
    return [node for item in completed for node in (item.nodes() if isinstance(item, TileLeaves) else [item])]


@pytest.mark.parametrize("stored_size", [0, 300, 700, 5000])
@pytest.mark.parametrize("first_leaves", [0, 5, 256])
@pytest.mark.parametrize("with_submissions", [True, False])
def test_tile_appends_match_leaf_appends(stored_size: int, first_leaves: int, with_submissions: bool) -> None:
    leaves = _leaves(1800)
    by_leaf, by_tile = Scan(stored_size, None), Scan(stored_size, None)
    nodes_by_leaf: list[Node | TileLeaves] = []
    nodes_by_tile: list[Node | TileLeaves] = []
    for seq, _, leaf in leaves:
        by_leaf.append_leaf(seq, leaf, nodes_by_leaf)
    for seq, _, leaf in leaves[:first_leaves]:
        by_tile.append_leaf(seq, leaf, nodes_by_tile)
    rest = leaves[first_leaves:]
    held = Leaves(
        first_leaves + 1,
        b"".join(leaf for _, _, leaf in rest),
        [submission for _, submission, _ in rest] if with_submissions else None,
    )
    by_tile.append(held, nodes_by_tile)
    assert by_tile.frontier == by_leaf.frontier
    assert all(not isinstance(item, TileLeaves) for item in nodes_by_leaf)
    assert _expanded(nodes_by_tile) == nodes_by_leaf
    assert len(nodes_by_leaf) == min(stored_size, len(leaves)) + min(stored_size, len(leaves)) // TILE_WIDTH


def test_leaves_split_keeps_positions_and_submissions() -> None:
    leaves = _leaves(10)
    held = Leaves(1, b"".join(leaf for _, _, leaf in leaves), [submission for _, submission, _ in leaves])
    head, tail = held.split(4)
    assert (len(head), len(tail), tail.first_seq) == (4, 6, 5)
    assert [tail.leaf(i) for i in range(6)] == [leaf for _, _, leaf in leaves[4:]]
    assert tail.submissions == [submission for _, submission, _ in leaves[4:]]
    with pytest.raises(ValueError, match="32 bytes each"):
        Leaves(1, b"\x00" * 33, None)
    with pytest.raises(ValueError, match="32 bytes each"):
        Leaves(1, b"\x00" * 64, ["one"])


def test_the_compiled_tile_root_takes_whole_tiles_of_this_width() -> None:
    assert leaf_fill._TILE_BYTES == TILE_WIDTH * HASH_SIZE
    whole = b"".join(leaf for _, _, leaf in _leaves(TILE_WIDTH))
    assert tile_root(whole) == root_from_leaf_hashes(
        [whole[i : i + HASH_SIZE] for i in range(0, len(whole), HASH_SIZE)]
    )
    with pytest.raises(ValueError, match="must be 32 bytes"):  # not bytes: the reference decides (refuses)
        tile_root(bytearray(whole))


@pytest.mark.parametrize("count", [1, 2, 3, 255, TILE_WIDTH, 257])
def test_a_tile_root_is_the_reference_root(count: int) -> None:
    hashes = [leaf for _, _, leaf in _leaves(count)]
    assert tile_root(b"".join(hashes)) == root_from_leaf_hashes(hashes)
    hashes[count // 2] = hashes[count // 2][
        : HASH_SIZE - 1
    ]  # not a hash: refused as the reference refuses it
    with pytest.raises(ValueError, match="must be 32 bytes"):
        tile_root(b"".join(hashes))
