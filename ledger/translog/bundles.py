"""JSON proof bundles: what ``ledger prove`` prints and ``ledger audit-log`` checks.

An inclusion bundle carries the entry's columns (so the verifier recomputes its hashes), the leaf
index and hash, the audit path and the signed checkpoint whose root the path leads to. A
consistency bundle carries both tree sizes and roots, the proof, and the signed checkpoints (when
the ledger has checkpoints at those sizes). Hashes are ``0x`` + lowercase hex; the checkpoint is
the signed note text verbatim.

Pure code: no database.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ledger.translog.leaves import ENTRY_FIELDS, hex32

__all__ = [
    "CONSISTENCY_FORMAT",
    "ENTRIES_FORMAT",
    "INCLUSION_FORMAT",
    "consistency_bundle",
    "entry_record",
    "inclusion_bundle",
]

INCLUSION_FORMAT = "cournot-ledger/inclusion-proof/v1"
CONSISTENCY_FORMAT = "cournot-ledger/consistency-proof/v1"
ENTRIES_FORMAT = "cournot-ledger/entries/v1"


def entry_record(row: Mapping[str, Any], *, with_payload: bool = False) -> dict[str, Any]:
    """The committed columns of an entry row as a JSON object (optionally with its payload text)."""
    record = {name: row[name] for name in ENTRY_FIELDS}
    if with_payload:
        record["payload_canonical"] = row["payload_canonical"]
    return record


def inclusion_bundle(
    entry: Mapping[str, Any],
    leaf_index: int,
    leaf_hash: bytes,
    tree_size: int,
    path: Sequence[bytes],
    root_hash: bytes,
    checkpoint_note: str | None,
) -> dict[str, Any]:
    """An inclusion proof of ``entry`` (leaf ``leaf_index``) in the tree of ``tree_size``."""
    return {
        "format": INCLUSION_FORMAT,
        "entry": dict(entry),
        "leaf_index": leaf_index,
        "leaf_hash": hex32(leaf_hash),
        "tree_size": tree_size,
        "root_hash": hex32(root_hash),
        "inclusion_path": [hex32(node) for node in path],
        "checkpoint": checkpoint_note,
    }


def consistency_bundle(
    old_size: int,
    new_size: int,
    old_root: bytes,
    new_root: bytes,
    proof: Sequence[bytes],
    old_checkpoint: str | None,
    new_checkpoint: str | None,
) -> dict[str, Any]:
    """A consistency proof that the ``old_size`` tree is a prefix of the ``new_size`` tree."""
    return {
        "format": CONSISTENCY_FORMAT,
        "old_size": old_size,
        "new_size": new_size,
        "old_root": hex32(old_root),
        "new_root": hex32(new_root),
        "consistency_path": [hex32(node) for node in proof],
        "old_checkpoint": old_checkpoint,
        "new_checkpoint": new_checkpoint,
    }
