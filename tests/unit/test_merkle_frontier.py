"""Frontier (compact range) appends and proofs served from stored perfect subtrees."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.merkle import (
    Frontier,
    Subtree,
    consistency_proof,
    consistency_proof_from_subtrees,
    empty_root,
    inclusion_proof,
    inclusion_proof_from_subtrees,
    leaf_hash,
    node_hash,
    perfect_subtree_ranges,
    root_from_leaf_hashes,
    root_from_subtrees,
    verify_consistency,
    verify_inclusion,
)


def h(text: str) -> bytes:
    return bytes.fromhex(text)


# transparency-dev/merkle testonly/constants.go: LeafInputs, NodeHashes, CompactTrees, RootHashes.
LEAF_INPUTS = [
    b"",
    b"\x00",
    b"\x10",
    b"\x20\x21",
    b"\x30\x31",
    b"\x40\x41\x42\x43",
    b"\x50\x51\x52\x53\x54\x55\x56\x57",
    b"\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f",
]
N00 = h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d")
N02 = h("0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7")
N04 = h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b")
N06 = h("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f")
N10 = h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125")
N12 = h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a")
N20 = h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")
N30 = h("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328")
COMPACT_TREES: list[tuple[bytes, ...]] = [
    (),
    (N00,),
    (N10,),
    (N10, N02),
    (N20,),
    (N20, N04),
    (N20, N12),
    (N20, N12, N06),
    (N30,),
]
ROOTS = [
    empty_root(),
    N00,
    N10,
    h("aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77"),
    N20,
    h("4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4"),
    h("76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef"),
    h("ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c"),
    N30,
]
LEAVES = [leaf_hash(data) for data in LEAF_INPUTS]
BIG = [leaf_hash(f"entry-{i}".encode()) for i in range(300)]


class SubtreeStore:
    """What a storage layer keeps: the hash of every completed perfect subtree, keyed by range.

    ``get`` checks the documented callback contract and counts reads.
    """

    def __init__(self) -> None:
        self.hashes: dict[tuple[int, int], bytes] = {}
        self.frontier = Frontier()
        self.reads = 0

    def append(self, leaf: bytes) -> None:
        self.frontier, completed = self.frontier.append_with_subtrees(leaf)
        for subtree in completed:
            self.hashes[subtree.start, subtree.end] = subtree.hash

    def getter(self, tree_size: int) -> Callable[[int, int], bytes]:
        def get(start: int, end: int) -> bytes:
            width = end - start
            assert width > 0 and width & (width - 1) == 0, (start, end)
            assert start % width == 0, (start, end)
            assert end <= tree_size, (start, end, tree_size)
            self.reads += 1
            return self.hashes[start, end]

        return get


def store_of(leaves: list[bytes]) -> SubtreeStore:
    store = SubtreeStore()
    for leaf in leaves:
        store.append(leaf)
    return store


BIG_STORE = store_of(BIG)
BIG_ROOTS = [root_from_leaf_hashes(BIG[:size]) for size in range(len(BIG) + 1)]


# --- known answers --------------------------------------------------------------------------------


@pytest.mark.parametrize("size", range(9))
def test_frontier_holds_published_compact_tree_and_root(size: int) -> None:
    frontier = Frontier.from_leaf_hashes(LEAVES[:size])
    assert frontier.size == size
    assert frontier.subtree_roots == COMPACT_TREES[size]
    assert frontier.root() == ROOTS[size]


def test_perfect_subtree_ranges() -> None:
    assert perfect_subtree_ranges(0, 0) == []
    assert perfect_subtree_ranges(0, 7) == [(0, 4), (4, 6), (6, 7)]
    assert perfect_subtree_ranges(0, 8) == [(0, 8)]
    assert perfect_subtree_ranges(4, 7) == [(4, 6), (6, 7)]
    assert perfect_subtree_ranges(3, 9) == [(3, 4), (4, 8), (8, 9)]
    with pytest.raises(ValueError):
        perfect_subtree_ranges(5, 4)


# --- appends ----------------------------------------------------------------------------------------


def test_frontier_root_equals_full_tree_root_at_every_size() -> None:
    frontier = Frontier()
    assert frontier.root() == empty_root()
    for size, leaf in enumerate(BIG, start=1):
        frontier = frontier.append(leaf)
        assert frontier.size == size
        assert len(frontier.subtree_roots) == size.bit_count()
        assert frontier.root() == BIG_ROOTS[size]


def test_frontier_is_immutable() -> None:
    empty = Frontier()
    one = empty.append(LEAVES[0])
    assert empty == Frontier(0, ()) and one == Frontier(1, (LEAVES[0],))
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.size = 2  # type: ignore[misc]


def test_append_reports_completed_subtrees_smallest_first() -> None:
    frontier = Frontier.from_leaf_hashes(LEAVES[:7])
    after, completed = frontier.append_with_subtrees(LEAVES[7])
    assert after.subtree_roots == (N30,)
    assert [(s.start, s.end) for s in completed] == [(7, 8), (6, 8), (4, 8), (0, 8)]
    assert completed[0] == Subtree(7, 8, LEAVES[7]) and completed[-1].hash == N30


def test_store_holds_every_perfect_subtree_with_the_right_hash() -> None:
    size = len(BIG)
    expected = {(start, start + (1 << level)) for level in range(9) for start in range(0, size, 1 << level)}
    expected = {(start, end) for start, end in expected if end <= size}
    assert set(BIG_STORE.hashes) == expected
    for (start, end), value in BIG_STORE.hashes.items():
        assert value == root_from_leaf_hashes(BIG[start:end])


@pytest.mark.parametrize(
    "bad",
    [
        {"size": 3, "subtree_roots": (N10,)},
        {"size": -1, "subtree_roots": ()},
        {"size": 1, "subtree_roots": (b"short",)},
        {"size": 1, "subtree_roots": [N00]},
    ],
)
def test_frontier_rejects_inconsistent_state(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Frontier(**bad)  # type: ignore[arg-type]


def test_append_rejects_non_hash() -> None:
    with pytest.raises(ValueError):
        Frontier().append(b"raw entry data")


# --- proofs from stored subtrees equal list-based proofs ------------------------------------------


def test_root_and_frontier_reload_from_store() -> None:
    for size in range(len(BIG) + 1):
        get = BIG_STORE.getter(size)
        assert root_from_subtrees(size, get) == BIG_ROOTS[size]
        assert Frontier.from_subtrees(size, get) == Frontier.from_leaf_hashes(BIG[:size])


def test_store_proofs_equal_list_proofs_exhaustively_up_to_48() -> None:
    for size in range(1, 49):
        get = BIG_STORE.getter(size)
        for index in range(size):
            assert inclusion_proof_from_subtrees(index, size, get) == inclusion_proof(BIG[:size], index)
        for old in range(size + 1):
            assert consistency_proof_from_subtrees(old, size, get) == consistency_proof(BIG, old, size)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), size=st.integers(min_value=1, max_value=300))
def test_store_proofs_equal_list_proofs(data: st.DataObject, size: int) -> None:
    index = data.draw(st.integers(min_value=0, max_value=size - 1))
    old = data.draw(st.integers(min_value=0, max_value=size))
    get = BIG_STORE.getter(size)
    path = inclusion_proof_from_subtrees(index, size, get)
    assert path == inclusion_proof(BIG[:size], index)
    assert verify_inclusion(BIG[index], index, size, path, BIG_ROOTS[size])
    proof = consistency_proof_from_subtrees(old, size, get)
    assert proof == consistency_proof(BIG, old, size)
    assert verify_consistency(old, size, BIG_ROOTS[old], BIG_ROOTS[size], proof)


@settings(max_examples=100, deadline=None)
@given(leaves=st.lists(st.binary(min_size=32, max_size=32), max_size=300))
def test_frontier_root_equals_list_root(leaves: list[bytes]) -> None:
    assert Frontier.from_leaf_hashes(leaves).root() == root_from_leaf_hashes(leaves)


def test_store_proofs_read_at_most_twice_the_depth() -> None:
    """Every sibling is one read except one right-edge sibling folded from <= log2(n) pieces."""
    for size in range(1, len(BIG) + 1):
        bound = 2 * (size - 1).bit_length()
        get = BIG_STORE.getter(size)
        for index in range(size):
            BIG_STORE.reads = 0
            inclusion_proof_from_subtrees(index, size, get)
            assert BIG_STORE.reads <= bound, (index, size)
            BIG_STORE.reads = 0
            consistency_proof_from_subtrees(index, size, get)
            assert BIG_STORE.reads <= bound, (index, size)


def test_proofs_for_a_hundred_million_leaves_take_few_reads() -> None:
    """A tree of identical leaves has one hash per level, so any size can be served lazily."""
    levels = [leaf_hash(b"same entry")]
    for _ in range(64):
        levels.append(node_hash(levels[-1], levels[-1]))
    reads: list[tuple[int, int]] = []

    def get(start: int, end: int) -> bytes:
        reads.append((start, end))
        return levels[(end - start).bit_length() - 1]

    size, old = 100_000_000, 73_456_789
    root = root_from_subtrees(size, get)
    old_root = root_from_subtrees(old, get)
    reads.clear()
    path = inclusion_proof_from_subtrees(12_345_678, size, get)
    assert len(reads) <= 2 * 27 and verify_inclusion(levels[0], 12_345_678, size, path, root)
    reads.clear()
    proof = consistency_proof_from_subtrees(old, size, get)
    assert len(reads) <= 2 * 27 and verify_consistency(old, size, old_root, root, proof)
    frontier = Frontier.from_subtrees(size, get)
    assert frontier.append(levels[0]).root() == root_from_subtrees(size + 1, get)


def test_store_callback_result_is_checked() -> None:
    with pytest.raises(ValueError):
        inclusion_proof_from_subtrees(0, 2, lambda start, end: b"not a hash")
    with pytest.raises(IndexError):
        inclusion_proof_from_subtrees(2, 2, BIG_STORE.getter(2))
    with pytest.raises(ValueError):
        consistency_proof_from_subtrees(3, 2, BIG_STORE.getter(2))
