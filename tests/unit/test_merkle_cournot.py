"""Cournot-compatible PoR Merkle tree: the vectors of the Cournot reference, section 3, and the
ways our verifier is deliberately stricter than Cournot's."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.canonical import from_hex, hash_concat, sha256, to_hex
from engine.merkle import (
    CournotProof,
    RootWithCount,
    compute_por_root,
    cournot_depth,
    cournot_proof,
    cournot_root,
    cournot_root_with_count,
    verify_cournot_proof,
)

A, B, C, D, E = (sha256(letter) for letter in (b"a", b"b", b"c", b"d", b"e"))
ROOT_AB = from_hex("0xe5a01fee14e0ed5c48714f22180f25ad8365b53f9779f79dc4a3d7e93963f94a")
ROOT_ABC = from_hex("0xd31a37ef6ac14a2db1470c4316beb5592e6afd4465022339adafda76a18ffabe")
ROOT_ABCD = from_hex("0x14ede5e8e97ad9372327728f5099b95604a39593cac3bd38a343ad76205213e7")
ROOT_ABCDE = from_hex("0xdd14d0ba516bb654a3052b76f051db026f4e322d0be081468fab99440f9e7305")
POR_ROOT_PERV = "0x025fc27fff5464598c3518a83f0ee8a283d4c664d97ca1eaa63da815a7d95fa9"

LEAVES = [sha256(f"step-{i}".encode()) for i in range(40)]


def cournot_naive_verify(proof: CournotProof) -> bool:
    """Cournot's own verification walk (no index range, no depth check), for comparison only."""
    current, index = proof.leaf, proof.index
    for sibling in proof.siblings:
        current = hash_concat(current, sibling) if index % 2 == 0 else hash_concat(sibling, current)
        index //= 2
    return current == proof.root


# --- published vectors ---------------------------------------------------------------------------


def test_leaves_are_sha256_of_letters() -> None:
    assert A.hex() == "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"
    assert B.hex() == "3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d"
    assert C.hex() == "2e7d2c03a9507ae265ecf5b5356885a53393a2029d241394997265a1a25aefc6"


@pytest.mark.parametrize(
    ("leaves", "expected"),
    [
        ([A, B], ROOT_AB),
        ([A, B, C], ROOT_ABC),
        ([A, B, C, D], ROOT_ABCD),
        ([A, B, C, D, E], ROOT_ABCDE),
    ],
    ids=["ab", "abc", "abcd", "abcde"],
)
def test_root_vectors(leaves: list[bytes], expected: bytes) -> None:
    assert cournot_root(leaves) == expected


def test_odd_level_duplicates_last_node_so_abc_equals_abcc() -> None:
    assert cournot_root([A, B, C]) == cournot_root([A, B, C, C]) == ROOT_ABC
    assert hash_concat(hash_concat(A, B), hash_concat(C, C)) == ROOT_ABC


def test_empty_tree_is_sha256_of_empty_bytes() -> None:
    assert cournot_root([]) == sha256(b"")
    assert to_hex(cournot_root([])).startswith("0xe3b0c442")


def test_single_leaf_is_its_own_root() -> None:
    assert cournot_root([A]) == A
    proof = cournot_proof([A], 0)
    assert proof.siblings == ()
    assert verify_cournot_proof(proof, root=A, leaf_count=1)


def test_no_domain_separation_parent_is_plain_sha256_of_concatenation() -> None:
    assert cournot_root([A, B]) == sha256(A + B)


def test_leaf_order_is_caller_defined_and_never_sorted() -> None:
    assert cournot_root([B, A]) != cournot_root([A, B])


def test_proof_vector_index_2_of_abc() -> None:
    proof = cournot_proof([A, B, C], 2)
    assert proof.siblings == (C, ROOT_AB)
    assert proof == CournotProof(leaf=C, index=2, siblings=(C, ROOT_AB), root=ROOT_ABC, leaf_count=3)
    assert verify_cournot_proof(proof, root=ROOT_ABC, leaf_count=3)


def test_proof_vector_index_4_of_five_leaves() -> None:
    proof = cournot_proof([A, B, C, D, E], 4)
    assert proof.siblings == (E, sha256(E + E), ROOT_ABCD)
    assert proof.root == ROOT_ABCDE
    assert verify_cournot_proof(proof, root=ROOT_ABCDE, leaf_count=5)


def test_por_root_vector() -> None:
    values = [to_hex(sha256(x)) for x in (b"p", b"e", b"r", b"v")]
    prompt, evidence, reasoning, verdict = (from_hex(value) for value in values)
    por_root = compute_por_root(prompt, evidence, reasoning, verdict)
    assert to_hex(por_root) == POR_ROOT_PERV
    assert por_root == sha256(sha256(prompt + evidence) + sha256(reasoning + verdict))


def test_root_with_count_carries_the_count_the_root_cannot() -> None:
    three = cournot_root_with_count([A, B, C])
    four = cournot_root_with_count([A, B, C, C])
    assert three == RootWithCount(root=ROOT_ABC, leaf_count=3)
    assert three.hex == to_hex(ROOT_ABC)
    assert three.root == four.root and three != four


def test_depth_is_ceil_log2() -> None:
    assert [cournot_depth(n) for n in range(1, 10)] == [0, 1, 2, 2, 3, 3, 3, 3, 4]
    with pytest.raises(ValueError):
        cournot_depth(0)


# --- builders reject what they cannot hash ----------------------------------------------------


def test_root_rejects_leaves_that_are_not_32_bytes() -> None:
    with pytest.raises(ValueError):
        cournot_root([A, b"short"])


@pytest.mark.parametrize("index", [-1, 3, 4, True])
def test_proof_builder_rejects_index_outside_tree(index: int) -> None:
    with pytest.raises(IndexError):
        cournot_proof([A, B, C], index)


# --- every honest proof verifies -----------------------------------------------------------------


@pytest.mark.parametrize("leaf_count", range(1, 34))
def test_every_proof_verifies_and_matches_cournot_walk(leaf_count: int) -> None:
    leaves = LEAVES[:leaf_count]
    root = cournot_root(leaves)
    for index in range(leaf_count):
        proof = cournot_proof(leaves, index)
        assert proof.root == root and proof.leaf_count == leaf_count
        assert len(proof.siblings) == cournot_depth(leaf_count)
        assert verify_cournot_proof(proof, root=root, leaf_count=leaf_count)
        assert cournot_naive_verify(proof)


# --- stricter than Cournot ---------------------------------------------------------------------


def test_phantom_padded_index_3_of_three_leaves_is_rejected() -> None:
    honest = cournot_proof([A, B, C], 2)
    phantom = dataclasses.replace(honest, index=3)
    assert cournot_naive_verify(phantom)  # Cournot accepts the padded copy as leaf 3
    assert not verify_cournot_proof(phantom, root=ROOT_ABC, leaf_count=3)
    # Claiming a 4-leaf tree instead needs the caller to trust leaf_count 4 for this root.
    assert not verify_cournot_proof(dataclasses.replace(phantom, leaf_count=4), root=ROOT_ABC, leaf_count=3)


def test_index_4_replaying_index_0_proof_on_four_leaves_is_rejected() -> None:
    replay = dataclasses.replace(cournot_proof([A, B, C, D], 0), index=4)
    assert cournot_naive_verify(replay)  # Cournot ignores the index range
    assert not verify_cournot_proof(replay, root=ROOT_ABCD, leaf_count=4)


def test_sibling_count_must_equal_depth() -> None:
    proof = cournot_proof([A, B, C, D], 1)
    longer = dataclasses.replace(proof, siblings=(*proof.siblings, ROOT_ABCD))
    shorter = dataclasses.replace(proof, siblings=proof.siblings[:-1])
    assert not verify_cournot_proof(longer, root=ROOT_ABCD, leaf_count=4)
    assert not verify_cournot_proof(shorter, root=ROOT_ABCD, leaf_count=4)


def test_interior_node_presented_as_leaf_is_rejected_by_depth() -> None:
    # Without domain separation hash(a||b) is a valid "leaf" of a 2-leaf tree [ab, cd].
    forged = CournotProof(
        leaf=ROOT_AB,
        index=0,
        siblings=(hash_concat(C, D),),
        root=ROOT_ABCD,
        leaf_count=4,
    )
    assert cournot_naive_verify(forged)
    assert not verify_cournot_proof(forged, root=ROOT_ABCD, leaf_count=4)


def test_padded_sibling_must_be_the_node_itself() -> None:
    proof = cournot_proof([A, B, C, D, E], 4)
    other = dataclasses.replace(proof, siblings=(D, *proof.siblings[1:]))
    assert not verify_cournot_proof(other, root=ROOT_ABCDE, leaf_count=5)


def test_right_edge_proof_binds_the_count_a_4_leaf_root_is_no_3_leaf_tree() -> None:
    # Leaf 2 of a 3-leaf tree is the padded edge, so its first sibling must be itself (c), not d.
    honest_for_four = cournot_proof([A, B, C, D], 2)
    claimed_three = dataclasses.replace(honest_for_four, leaf_count=3)
    assert cournot_naive_verify(claimed_three)
    assert not verify_cournot_proof(claimed_three, root=ROOT_ABCD, leaf_count=3)


def test_proof_claims_must_match_trusted_root_and_count() -> None:
    proof = cournot_proof([A, B, C, D], 2)
    assert not verify_cournot_proof(proof, root=ROOT_ABC, leaf_count=4)
    assert not verify_cournot_proof(proof, root=ROOT_ABCD, leaf_count=3)
    assert not verify_cournot_proof(dataclasses.replace(proof, leaf_count=5), root=ROOT_ABCD, leaf_count=4)
    assert not verify_cournot_proof(dataclasses.replace(proof, root=ROOT_ABC), root=ROOT_ABCD, leaf_count=4)


def test_zero_leaf_count_has_no_proofs() -> None:
    proof = CournotProof(leaf=A, index=0, siblings=(), root=A, leaf_count=0)
    assert not verify_cournot_proof(proof, root=A, leaf_count=0)


# --- mutated-proof corpus -----------------------------------------------------------------------


def _mutations(proof: CournotProof, leaves: list[bytes]) -> list[tuple[str, CournotProof, int]]:
    """(description, mutated proof, trusted leaf_count) for one honest proof."""
    n, replace = proof.leaf_count, dataclasses.replace
    out: list[tuple[str, CournotProof, int]] = []
    for position, sibling in enumerate(proof.siblings):
        for bit in range(256):
            flipped = bytearray(sibling)
            flipped[bit // 8] ^= 0x80 >> (bit % 8)
            siblings = list(proof.siblings)
            siblings[position] = bytes(flipped)
            out.append((f"bit {bit} of sibling {position}", replace(proof, siblings=tuple(siblings)), n))
    for index in (proof.index - 1, proof.index + 1, proof.index ^ 2, proof.index + n):
        out.append((f"index {index}", replace(proof, index=index), n))
    for count in (n * 2, n // 2, n - 1, n + 1):
        # A count with the same depth is indistinguishable when the path misses the padded edge
        # (the root alone does not bind the count, see test_root_with_count_...); all others fail.
        if count < 1 or cournot_depth(count) != cournot_depth(n) or count <= proof.index:
            out.append((f"leaf_count {count}", replace(proof, leaf_count=count), count))
    if proof.siblings:
        out.append(("truncated", replace(proof, siblings=proof.siblings[:-1]), n))
        swapped = tuple(reversed(proof.siblings))
        if swapped != proof.siblings:
            out.append(("swapped siblings", replace(proof, siblings=swapped), n))
    out.append(("extended", replace(proof, siblings=(*proof.siblings, proof.root)), n))
    for other in range(n):
        if leaves[other] != proof.leaf:
            out.append((f"leaf of {other}", replace(proof, leaf=leaves[other]), n))
    out.append(("wrong root", replace(proof, root=sha256(proof.root)), n))
    return out


@pytest.mark.parametrize("leaf_count", range(1, 18))
def test_mutated_proofs_are_rejected(leaf_count: int) -> None:
    leaves = LEAVES[:leaf_count]
    root = cournot_root(leaves)
    accepted: list[str] = []
    for index in range(leaf_count):
        proof = cournot_proof(leaves, index)
        assert verify_cournot_proof(proof, root=root, leaf_count=leaf_count)
        for description, mutated, trusted_count in _mutations(proof, leaves):
            if verify_cournot_proof(mutated, root=root, leaf_count=trusted_count):
                accepted.append(f"index {index}: {description}")
    assert accepted == []


# --- totality ----------------------------------------------------------------------------------

_anything = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.binary(max_size=40),
    st.text(max_size=4),
    st.lists(st.binary(min_size=31, max_size=33), max_size=8),
    st.tuples(st.binary(min_size=32, max_size=32)),
)


@settings(max_examples=300, deadline=None)
@given(
    leaf=_anything,
    index=_anything,
    siblings=st.one_of(_anything, st.lists(st.binary(min_size=32, max_size=32), max_size=70).map(tuple)),
    proof_root=_anything,
    proof_count=_anything,
    root=_anything,
    leaf_count=_anything,
)
def test_verify_never_raises(
    leaf: object,
    index: object,
    siblings: object,
    proof_root: object,
    proof_count: object,
    root: object,
    leaf_count: object,
) -> None:
    proof = CournotProof(leaf, index, siblings, proof_root, proof_count)  # type: ignore[arg-type]
    assert verify_cournot_proof(proof, root=root, leaf_count=leaf_count) in (True, False)  # type: ignore[arg-type]
    assert verify_cournot_proof("not a proof", root=A, leaf_count=1) is False  # type: ignore[arg-type]
