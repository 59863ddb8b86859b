"""Cournot-compatible proof-of-reasoning Merkle tree (reference: Cournot protocol, section 3).

Byte-identical to Cournot's ``core/merkle/merkle_tree.py`` for roots and proofs:

* leaves are 32-byte hashes supplied by the caller (never re-hashed, no domain prefix);
* parent = ``sha256(left || right)``;
* on every level with an odd number of nodes the last node is duplicated;
* the empty tree hashes to ``sha256(b"")``; a single leaf is its own root.

Deliberate divergence: :func:`verify_cournot_proof` binds the proof to a trusted leaf count.
It rejects indexes outside ``[0, leaf_count)``, sibling lists whose length is not the tree depth,
and padded positions whose sibling is not the node itself, so the phantom leaf of an odd tree
(index 3 of a 3-leaf tree) and index-0 proofs replayed at index 4 no longer verify. Duplicate-last
padding still makes ``root([a, b, c]) == root([a, b, c, c])``; store the leaf count next to every
root (:class:`RootWithCount`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.canonical import hash_concat, to_hex
from engine.merkle.cournot_fold import HASH_SIZE, cournot_root, require_leaves

__all__ = [
    "CournotProof",
    "RootWithCount",
    "compute_por_root",
    "cournot_depth",
    "cournot_proof",
    "cournot_root",
    "cournot_root_with_count",
    "verify_cournot_proof",
]


@dataclass(frozen=True)
class CournotProof:
    """Inclusion proof for one leaf: siblings run bottom-up, ``root`` and ``leaf_count`` are claims."""

    leaf: bytes
    index: int
    siblings: tuple[bytes, ...]
    root: bytes
    leaf_count: int


@dataclass(frozen=True)
class RootWithCount:
    """A Cournot root together with the number of leaves it commits to."""

    root: bytes
    leaf_count: int

    @property
    def hex(self) -> str:
        """The root as ``0x`` + lowercase hex."""
        return to_hex(self.root)


_require_leaves = require_leaves


def _parent_level(level: list[bytes]) -> list[bytes]:
    if len(level) % 2:
        level = [*level, level[-1]]
    return [hash_concat(level[i], level[i + 1]) for i in range(0, len(level), 2)]


def cournot_depth(leaf_count: int) -> int:
    """Number of siblings in every proof of a ``leaf_count``-leaf tree (``ceil(log2(n))``)."""
    if leaf_count < 1:
        raise ValueError("a tree with proofs has at least one leaf")
    return (leaf_count - 1).bit_length()


def cournot_root_with_count(leaves: Sequence[bytes]) -> RootWithCount:
    """:func:`cournot_root` paired with the leaf count, which the root alone does not bind."""
    level = _require_leaves(leaves)
    return RootWithCount(root=cournot_root(level), leaf_count=len(level))


def cournot_proof(leaves: Sequence[bytes], index: int) -> CournotProof:
    """Proof for ``leaves[index]`` exactly as Cournot builds it (padded levels, sibling at ``i ^ 1``)."""
    level = _require_leaves(leaves)
    if isinstance(index, bool) or not 0 <= index < len(level):
        raise IndexError(f"leaf index {index} outside [0, {len(level)})")
    siblings: list[bytes] = []
    position = index
    while len(level) > 1:
        padded = [*level, level[-1]] if len(level) % 2 else level
        siblings.append(padded[position ^ 1])
        level = _parent_level(level)
        position //= 2
    return CournotProof(
        leaf=leaves[index],
        index=index,
        siblings=tuple(siblings),
        root=level[0],
        leaf_count=len(leaves),
    )


def _is_hash(value: object) -> bool:
    return isinstance(value, bytes) and len(value) == HASH_SIZE


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def verify_cournot_proof(proof: CournotProof, *, root: bytes, leaf_count: int) -> bool:
    """True iff ``proof`` shows its leaf at its index in the tree with trusted ``root``/``leaf_count``.

    Stricter than Cournot: the index must lie in ``[0, leaf_count)``, the sibling count must equal
    :func:`cournot_depth`, a node duplicated by padding must have itself as sibling, and the
    proof's own ``root``/``leaf_count`` claims must match the trusted ones. Never raises.
    """
    if not isinstance(proof, CournotProof) or not _is_hash(root) or not _is_count(leaf_count):
        return False
    index, siblings = proof.index, proof.siblings
    if not _is_count(index) or not isinstance(siblings, tuple) or leaf_count < 1:
        return False
    if not 0 <= index < leaf_count or proof.leaf_count != leaf_count or proof.root != root:
        return False
    if len(siblings) != cournot_depth(leaf_count) or not _is_hash(proof.leaf):
        return False
    current, position, width = proof.leaf, index, leaf_count
    for sibling in siblings:
        if not _is_hash(sibling):
            return False
        if position == width - 1 and width % 2 and sibling != current:
            return False  # the padded copy of the last node is the node itself
        current = hash_concat(current, sibling) if position % 2 == 0 else hash_concat(sibling, current)
        position //= 2
        width = (width + 1) // 2
    return current == root


def compute_por_root(
    prompt_spec_hash: bytes, evidence_root: bytes, reasoning_root: bytes, verdict_hash: bytes
) -> bytes:
    """PoR root: :func:`cournot_root` over the four 32-byte commitments, in this order."""
    return cournot_root([prompt_spec_hash, evidence_root, reasoning_root, verdict_hash])
