"""Merkle trees: the Cournot-compatible PoR tree and the RFC 6962 / RFC 9162 log tree.

Pure functions over bytes and integers; see :mod:`engine.merkle.cournot` and
:mod:`engine.merkle.rfc6962` for the exact rules of each scheme.
"""

from engine.merkle.cournot import (
    CournotProof,
    RootWithCount,
    compute_por_root,
    cournot_depth,
    cournot_proof,
    cournot_root,
    cournot_root_with_count,
    verify_cournot_proof,
)
from engine.merkle.rfc6962 import (
    HASH_SIZE,
    MAX_TREE_SIZE,
    Frontier,
    Subtree,
    SubtreeHashGetter,
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

__all__ = [
    "HASH_SIZE",
    "MAX_TREE_SIZE",
    "CournotProof",
    "Frontier",
    "RootWithCount",
    "Subtree",
    "SubtreeHashGetter",
    "compute_por_root",
    "consistency_proof",
    "consistency_proof_from_subtrees",
    "cournot_depth",
    "cournot_proof",
    "cournot_root",
    "cournot_root_with_count",
    "empty_root",
    "inclusion_proof",
    "inclusion_proof_from_subtrees",
    "leaf_hash",
    "node_hash",
    "perfect_subtree_ranges",
    "root_from_leaf_hashes",
    "root_from_subtrees",
    "verify_consistency",
    "verify_cournot_proof",
    "verify_inclusion",
]
