"""RFC 6962 / RFC 9162 tree: transparency-dev known-answer vectors, a mutated-proof corpus, and
fuzzing that the verifiers are total."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.merkle import (
    consistency_proof,
    empty_root,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root_from_leaf_hashes,
    verify_consistency,
    verify_inclusion,
)


def h(text: str) -> bytes:
    return bytes.fromhex(text)


# transparency-dev/merkle testonly/constants.go: the eight leaf inputs, the hashes of every
# perfect subtree by level, and the root of every prefix tree.
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
NODES = [
    [
        h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
        h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
        h("0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7"),
        h("07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7"),
        h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        h("4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658"),
        h("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f"),
        h("46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1"),
    ],
    [
        h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"),
        h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
        h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
        h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
    ],
    [
        h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
    ],
    [h("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328")],
]
EMPTY_ROOT = h("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
ROOTS = [
    EMPTY_ROOT,
    h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
    h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"),
    h("aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77"),
    h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
    h("4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4"),
    h("76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef"),
    h("ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c"),
    h("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"),
]
LEAVES = [leaf_hash(data) for data in LEAF_INPUTS]

# transparency-dev/merkle proof/verify_test.go (leaf indexes here are 0-based).
INCLUSION_VECTORS = [
    (0, 1, []),
    (0, 8, [NODES[0][1], NODES[1][1], NODES[2][1]]),
    (5, 8, [NODES[0][4], NODES[1][3], NODES[2][0]]),
    (2, 3, [ROOTS[2]]),
    (1, 5, [NODES[0][0], NODES[1][1], NODES[0][4]]),
]
CONSISTENCY_VECTORS = [
    (1, 1, []),
    (1, 8, [NODES[0][1], NODES[1][1], NODES[2][1]]),
    (6, 8, [NODES[1][2], NODES[1][3], NODES[2][0]]),
    (2, 5, [NODES[1][1], NODES[0][4]]),
    (6, 7, [NODES[1][2], NODES[0][6], NODES[2][0]]),
]


def n(level: int, index: int) -> bytes:
    return NODES[level][index]


L_IJ = node_hash(n(1, 2), n(0, 6))  # the right-edge node over leaves [4, 7)

# transparency-dev/merkle proof/proof_test.go: node ids of proofs within the 8-leaf tree.
INCLUSION_NODES = {
    (0, 2): [n(0, 1)],
    (1, 2): [n(0, 0)],
    (1, 3): [n(0, 0), n(0, 2)],
    (0, 7): [n(0, 1), n(1, 1), L_IJ],
    (2, 7): [n(0, 3), n(1, 0), L_IJ],
    (4, 7): [n(0, 5), n(0, 6), n(2, 0)],
    (6, 7): [n(1, 2), n(2, 0)],
    (2, 4): [n(0, 3), n(1, 0)],
    (3, 5): [n(0, 2), n(1, 0), n(0, 4)],
    (3, 6): [n(0, 2), n(1, 0), n(1, 2)],
    (4, 6): [n(0, 5), n(2, 0)],
}
CONSISTENCY_NODES = {
    (1, 2): [n(0, 1)],
    (1, 4): [n(0, 1), n(1, 1)],
    (1, 6): [n(0, 1), n(1, 1), n(1, 2)],
    (2, 3): [n(0, 2)],
    (2, 8): [n(1, 1), n(2, 1)],
    (3, 7): [n(0, 2), n(0, 3), n(1, 0), L_IJ],
    (4, 7): [L_IJ],
    (5, 7): [n(0, 4), n(0, 5), n(0, 6), n(2, 0)],
    (6, 7): [n(1, 2), n(0, 6), n(2, 0)],
    (7, 8): [n(0, 6), n(0, 7), n(1, 2), n(2, 0)],
    (2, 4): [n(1, 1)],
    (3, 5): [n(0, 2), n(0, 3), n(1, 0), n(0, 4)],
    (3, 6): [n(0, 2), n(0, 3), n(1, 0), n(1, 2)],
    (4, 6): [n(1, 2)],
    (1, 7): [n(0, 1), n(1, 1), L_IJ],
}


# --- hashing ------------------------------------------------------------------------------------


def test_hasher_known_answers() -> None:
    assert empty_root() == EMPTY_ROOT
    assert leaf_hash(b"") == h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d")
    assert leaf_hash(b"L123456") == h("395aa064aa4c29f7010acfe3f25db9485bbd4b91897b6ad7ad547639252b4d56")
    assert node_hash(b"N123", b"N456") == h(
        "aa217fe888e47007fa15edab33c2b492a722cb106c64667fc2b044444de66bbb"
    )


def test_node_hash_is_not_leaf_hash_of_concatenation_and_depends_on_order() -> None:
    left, right = leaf_hash(b"Hello"), leaf_hash(b"World")
    assert left != right
    assert node_hash(left, right) != leaf_hash(left + right)
    assert node_hash(left, right) != node_hash(right, left)


@pytest.mark.parametrize("size", range(9))
def test_root_of_every_prefix_matches_published_root(size: int) -> None:
    assert root_from_leaf_hashes(LEAVES[:size]) == ROOTS[size]


def test_every_perfect_subtree_matches_published_node_hashes() -> None:
    for level, row in enumerate(NODES):
        width = 1 << level
        for index, expected in enumerate(row):
            assert root_from_leaf_hashes(LEAVES[index * width : (index + 1) * width]) == expected


def test_odd_leaves_are_never_duplicated() -> None:
    assert root_from_leaf_hashes(LEAVES[:3]) != root_from_leaf_hashes([*LEAVES[:3], LEAVES[2]])
    assert ROOTS[3] == node_hash(n(1, 0), n(0, 2))


def test_builders_reject_hashes_that_are_not_32_bytes() -> None:
    with pytest.raises(ValueError):
        root_from_leaf_hashes([LEAVES[0], b"\x00" * 31])
    with pytest.raises(ValueError):
        inclusion_proof([b"data"], 0)


# --- inclusion ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("index", "size", "path"), INCLUSION_VECTORS)
def test_inclusion_vectors(index: int, size: int, path: list[bytes]) -> None:
    assert inclusion_proof(LEAVES[:size], index) == path
    assert verify_inclusion(LEAVES[index], index, size, path, ROOTS[size])


@pytest.mark.parametrize(("index", "size"), sorted(INCLUSION_NODES))
def test_inclusion_paths_take_the_published_nodes(index: int, size: int) -> None:
    assert inclusion_proof(LEAVES[:size], index) == INCLUSION_NODES[index, size]


@pytest.mark.parametrize(("index", "size"), [(0, 0), (1, 0), (1, 1), (2, 1), (8, 7), (-1, 3)])
def test_inclusion_proof_rejects_index_outside_tree(index: int, size: int) -> None:
    with pytest.raises(IndexError):
        inclusion_proof(LEAVES[:size], index)


def test_single_entry_tree_has_empty_proof_and_root_is_the_leaf() -> None:
    data_hash = leaf_hash(b"data")
    assert inclusion_proof([data_hash], 0) == []
    assert verify_inclusion(data_hash, 0, 1, [], data_hash)
    assert not verify_inclusion(data_hash, 0, 1, [], b"")
    assert not verify_inclusion(b"", 0, 1, [], data_hash)
    assert not verify_inclusion(b"", 0, 1, [], b"")


@pytest.mark.parametrize(("index", "size"), [(0, 0), (0, 1), (1, 0), (2, 1)])
def test_inclusion_probes_with_bad_leaf_or_root_fail(index: int, size: int) -> None:
    some_hash = h("abacaba000000000000000000000000000000000000000000060061e00123456")
    assert not verify_inclusion(some_hash, index, size, [], b"")
    assert not verify_inclusion(b"", index, size, [], EMPTY_ROOT)
    assert not verify_inclusion(some_hash, index, size, [], EMPTY_ROOT)


# --- consistency --------------------------------------------------------------------------------


@pytest.mark.parametrize(("old", "new", "path"), CONSISTENCY_VECTORS)
def test_consistency_vectors(old: int, new: int, path: list[bytes]) -> None:
    assert consistency_proof(LEAVES[:new], old, new) == path
    assert verify_consistency(old, new, ROOTS[old], ROOTS[new], path)


@pytest.mark.parametrize(("old", "new"), sorted(CONSISTENCY_NODES))
def test_consistency_paths_take_the_published_nodes(old: int, new: int) -> None:
    assert consistency_proof(LEAVES, old, new) == CONSISTENCY_NODES[old, new]


def test_consistency_edge_cases() -> None:
    root1, root2 = ROOTS[1], ROOTS[2]
    assert verify_consistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])
    assert verify_consistency(0, 2, EMPTY_ROOT, root2, [])
    assert verify_consistency(1, 1, root1, root1, [])
    assert not verify_consistency(0, 0, root1, root2, [])
    assert not verify_consistency(0, 0, root1, root1, [])  # size 0 must have the empty root
    assert not verify_consistency(1, 1, root1, root2, [])
    assert not verify_consistency(1, 0, root1, root2, [])  # time travel
    assert not verify_consistency(2, 1, root1, root2, [])
    assert not verify_consistency(1, 2, root1, root2, [])  # empty proof
    assert not verify_consistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [EMPTY_ROOT])
    assert not verify_consistency(0, 1, EMPTY_ROOT, EMPTY_ROOT, [EMPTY_ROOT])
    assert not verify_consistency(1, 1, EMPTY_ROOT, EMPTY_ROOT, [EMPTY_ROOT])


@pytest.mark.parametrize(("old", "new"), [(-1, 2), (3, 2), (2, 9), (0, -1)])
def test_consistency_proof_rejects_bad_sizes(old: int, new: int) -> None:
    with pytest.raises(ValueError):
        consistency_proof(LEAVES, old, new)


# --- every honest proof verifies ------------------------------------------------------------------

BIG = [leaf_hash(f"entry-{i}".encode()) for i in range(70)]
BIG_ROOTS = [root_from_leaf_hashes(BIG[:size]) for size in range(len(BIG) + 1)]


def test_every_inclusion_and_consistency_proof_up_to_64_verifies() -> None:
    for size in range(1, 65):
        for index in range(size):
            path = inclusion_proof(BIG[:size], index)
            assert verify_inclusion(BIG[index], index, size, path, BIG_ROOTS[size]), (index, size)
        for old in range(size + 1):
            path = consistency_proof(BIG, old, size)
            assert verify_consistency(old, size, BIG_ROOTS[old], BIG_ROOTS[size], path), (old, size)


# --- mutated-proof corpus -------------------------------------------------------------------------


def _split(count: int) -> int:
    return 1 << ((count - 1).bit_length() - 1)


def inclusion_shape(index: int, size: int) -> tuple[bool, ...] | None:
    """Bottom-up sides of the siblings (True: sibling on the left); None if no proof exists.

    Two (index, size) pairs with the same shape make the verifier compute the same expression, so
    a proof for one verifies for the other: the proof alone does not bind the tree size.
    """
    if not 0 <= index < size:
        return None
    sides: list[bool] = []
    start, end = 0, size
    while end - start > 1:
        mid = start + _split(end - start)
        sides.append(index >= mid)
        start, end = (mid, end) if index >= mid else (start, mid)
    return tuple(reversed(sides))


def consistency_shape(old: int, new: int) -> tuple[str, ...] | None:
    """The hash operations RFC 9162 §2.1.4.2 performs for these sizes; None if none can verify."""
    if not 0 < old < new:
        return None
    ops = ["old root seeds" if old & (old - 1) == 0 else "proof seeds"]
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    while sn:
        if fn & 1 or fn == sn:
            ops.append("left")
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            ops.append("right")
        fn, sn = fn >> 1, sn >> 1
    return tuple(ops)


def flip(value: bytes, bit: int) -> bytes:
    mutated = bytearray(value)
    mutated[bit // 8] ^= 0x80 >> (bit % 8)
    return bytes(mutated)


def list_mutations(path: list[bytes], extras: list[bytes], all_bits: bool) -> list[tuple[str, list[bytes]]]:
    """Proof-list mutations shared by both proof kinds."""
    out: list[tuple[str, list[bytes]]] = []
    bits = range(256) if all_bits else (0, 3, 4, 255)
    for position, item in enumerate(path):
        for bit in bits:
            out.append(
                (f"bit {bit} of [{position}]", [*path[:position], flip(item, bit), *path[position + 1 :]])
            )
    if path:
        out.append(("truncated", path[:-1]))
        out.append(("first removed", path[1:]))
    for position in range(len(path) - 1):
        if path[position] != path[position + 1]:
            swapped = list(path)
            swapped[position], swapped[position + 1] = swapped[position + 1], swapped[position]
            out.append((f"swapped [{position}] and [{position + 1}]", swapped))
    for extra in extras:
        out.append((f"extended by {extra.hex()[:8]}", [*path, extra]))
        out.append((f"preceded by {extra.hex()[:8]}", [extra, *path]))
    if len(path) > 1:
        out.append(("inserted component", [path[0], extras[0], *path[1:]]))
    return out


def inclusion_corpus_failures(size: int, all_bits: bool) -> list[str]:
    root, failures = BIG_ROOTS[size], []
    for index in range(size):
        path, leaf = inclusion_proof(BIG[:size], index), BIG[index]
        assert verify_inclusion(leaf, index, size, path, root)
        extras = [b"\x00" * 32, root, leaf, EMPTY_ROOT]
        for description, mutated in list_mutations(path, extras, all_bits):
            if verify_inclusion(leaf, index, size, mutated, root):
                failures.append(f"{index}/{size}: {description}")
        for new_index in (index - 1, index + 1, index ^ 2):
            if verify_inclusion(leaf, new_index, size, path, root):
                failures.append(f"{index}/{size}: index {new_index}")
        for new_size in (size * 2, size // 2):
            if verify_inclusion(leaf, index, new_size, path, root):
                failures.append(f"{index}/{size}: size {new_size}")
        for new_size in (size - 1, size + 1):  # rejected unless the path shape is unchanged
            expected = inclusion_shape(index, new_size) == inclusion_shape(index, size)
            if verify_inclusion(leaf, index, new_size, path, root) != expected:
                failures.append(f"{index}/{size}: size {new_size}")
        for other in range(len(BIG)):
            if other != index and verify_inclusion(BIG[other], index, size, path, root):
                failures.append(f"{index}/{size}: leaf of {other}")
        for wrong_root in (flip(root, 7), EMPTY_ROOT, BIG_ROOTS[size - 1], BIG_ROOTS[size + 1], leaf):
            if wrong_root != root and verify_inclusion(leaf, index, size, path, wrong_root):
                failures.append(f"{index}/{size}: root {wrong_root.hex()[:8]}")
    return failures


def consistency_corpus_failures(old: int, new: int, all_bits: bool) -> list[str]:
    old_root, new_root, failures = BIG_ROOTS[old], BIG_ROOTS[new], []
    path = consistency_proof(BIG, old, new)
    assert verify_consistency(old, new, old_root, new_root, path)
    extras = [b"\x00" * 32, old_root, new_root, path[0]]
    for description, mutated in [*list_mutations(path, extras, all_bits), ("empty proof", [])]:
        if verify_consistency(old, new, old_root, new_root, mutated):
            failures.append(f"{old}->{new}: {description}")
    size_pairs = [(old - 1, new), (old + 1, new), (old ^ 2, new), (old * 2, new), (old // 2, new)]
    size_pairs += [(old, new * 2), (old, new // 2), (new, old)]
    for new_old, new_new in size_pairs:
        if verify_consistency(new_old, new_new, old_root, new_root, path):
            failures.append(f"{old}->{new}: sizes {new_old}->{new_new}")
    for new_new in (new - 1, new + 1):  # rejected unless the verifier's hash operations are unchanged
        expected = consistency_shape(old, new_new) == consistency_shape(old, new)
        if verify_consistency(old, new_new, old_root, new_root, path) != expected:
            failures.append(f"{old}->{new}: sizes {old}->{new_new}")
    roots = [(new_root, old_root), (flip(old_root, 9), new_root), (old_root, flip(new_root, 9))]
    roots += [(EMPTY_ROOT, new_root), (old_root, EMPTY_ROOT), (BIG_ROOTS[old - 1], new_root)]
    roots += [(old_root, BIG_ROOTS[new + 1]), (old_root, old_root)]
    for wrong_old, wrong_new in roots:
        if (wrong_old, wrong_new) != (old_root, new_root) and verify_consistency(
            old, new, wrong_old, wrong_new, path
        ):
            failures.append(f"{old}->{new}: roots {wrong_old.hex()[:8]} {wrong_new.hex()[:8]}")
    return failures


@pytest.mark.parametrize("size", range(1, 18))
def test_inclusion_corpus_every_bit_flip(size: int) -> None:
    assert inclusion_corpus_failures(size, all_bits=True) == []


@pytest.mark.parametrize("size", range(18, 66, 3))
def test_inclusion_corpus_larger_trees(size: int) -> None:
    assert inclusion_corpus_failures(size, all_bits=False) == []


@pytest.mark.parametrize("new", range(2, 18))
def test_consistency_corpus_every_bit_flip(new: int) -> None:
    for old in range(1, new):
        assert consistency_corpus_failures(old, new, all_bits=True) == []


@pytest.mark.parametrize("new", range(18, 66, 4))
def test_consistency_corpus_larger_trees(new: int) -> None:
    for old in range(1, new):
        assert consistency_corpus_failures(old, new, all_bits=False) == []


def test_proof_alone_does_not_bind_tree_size() -> None:
    """Why a root must travel with its size: a 3-leaf proof also verifies as a 4-leaf claim."""
    path = inclusion_proof(BIG[:3], 0)
    assert verify_inclusion(BIG[0], 0, 4, path, BIG_ROOTS[3])
    assert inclusion_shape(0, 3) == inclusion_shape(0, 4)
    proof = consistency_proof(BIG, 2, 3)
    assert verify_consistency(2, 4, BIG_ROOTS[2], BIG_ROOTS[3], proof)
    assert not verify_consistency(2, 4, BIG_ROOTS[2], BIG_ROOTS[4], proof)


# --- totality ----------------------------------------------------------------------------------

_hashes = st.binary(min_size=32, max_size=32)
_anything = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.binary(max_size=40),
    st.text(max_size=4),
    st.lists(st.binary(min_size=30, max_size=33), max_size=6),
)
_sizes = st.one_of(
    st.integers(min_value=-3, max_value=300),
    st.integers(min_value=2**64 - 3, max_value=2**64 + 3),
    st.integers(min_value=0, max_value=2**64 - 1),
)
_proofs = st.one_of(st.lists(_hashes, max_size=140), st.lists(_hashes, max_size=5).map(tuple), _anything)
_roots = st.one_of(_hashes, st.sampled_from(BIG_ROOTS), _anything)


@settings(max_examples=500, deadline=None)
@given(
    leaf=_roots,
    index=st.one_of(_sizes, _anything),
    size=st.one_of(_sizes, _anything),
    proof=_proofs,
    root=_roots,
)
def test_verify_inclusion_never_raises(
    leaf: object, index: object, size: object, proof: object, root: object
) -> None:
    result = verify_inclusion(leaf, index, size, proof, root)  # type: ignore[arg-type]
    assert result is True or result is False


@settings(max_examples=500, deadline=None)
@given(
    old=st.one_of(_sizes, _anything),
    new=st.one_of(_sizes, _anything),
    old_root=_roots,
    new_root=_roots,
    proof=_proofs,
)
def test_verify_consistency_never_raises(
    old: object, new: object, old_root: object, new_root: object, proof: object
) -> None:
    result = verify_consistency(old, new, old_root, new_root, proof)  # type: ignore[arg-type]
    assert result is True or result is False


@settings(max_examples=300, deadline=None)
@given(data=st.data(), size=st.integers(min_value=1, max_value=69))
def test_random_proof_hashes_with_right_shape_do_not_verify(data: st.DataObject, size: int) -> None:
    index = data.draw(st.integers(min_value=0, max_value=size - 1))
    length = len(inclusion_proof(BIG[:size], index))
    forged = data.draw(st.lists(_hashes, min_size=length, max_size=length))
    if forged != inclusion_proof(BIG[:size], index):
        assert not verify_inclusion(BIG[index], index, size, forged, BIG_ROOTS[size])
