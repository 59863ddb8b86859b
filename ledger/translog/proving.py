"""Building proof bundles and log exports from the database (``ledger prove``, ``ledger export-log``).

Every proof is checked with the engine's verifier before it is handed out, so a damaged tree
yields an error here rather than a bundle that fails later at the auditor's.
"""

from __future__ import annotations

import json
import re
from itertools import pairwise
from pathlib import Path
from typing import Any

from engine.merkle.rfc6962 import verify_consistency, verify_inclusion
from ledger.translog.bundles import consistency_bundle, entry_record, inclusion_bundle
from ledger.translog.checkpoints import (
    StoredCheckpoint,
    covering_checkpoint,
    find_checkpoint,
    list_checkpoints,
    matches_note,
)
from ledger.translog.db import Database, run_dicts
from ledger.translog.leaves import check_stored_entry, entry_leaf_hash
from ledger.translog.tree import (
    ENTRIES,
    ENTRY_COLUMNS,
    TreeError,
    consistency_at,
    consistency_proof_at,
    inclusion_proof_at,
    read_entries,
    tree_size,
)

__all__ = [
    "ProofDamagedError",
    "ProofError",
    "export_log",
    "find_entries",
    "prove_consistency",
    "prove_entries",
]

_HEX32 = re.compile(r"0x[0-9a-f]{64}")
EXPORT_BATCH = 5000


class ProofError(RuntimeError):
    """A proof cannot be given: unknown entry, no checkpoint yet, sizes out of range, damaged tree."""


class ProofDamagedError(ProofError):
    """The stored entries, tree or checkpoints do not verify (tampering or damage), so no proof is given."""


def find_entries(db: Database, target: str) -> list[dict[str, Any]]:
    """Entries named by a global_seq, a submission id, an idempotency key or an entry hash."""
    select = f"SELECT {ENTRY_COLUMNS} FROM {ENTRIES}"
    if target.isdigit():
        rows = run_dicts(db, f"{select} WHERE global_seq = %(value)s", {"value": int(target)})
    elif _HEX32.fullmatch(target.lower()):
        value = target.lower()
        rows = run_dicts(
            db, f"{select} WHERE submission_id = %(value)s ORDER BY stream_seq", {"value": value}
        )
        if not rows:  # an entry hash; entry_hash has no index, so this one is a scan
            rows = run_dicts(db, f"{select} WHERE entry_hash = %(value)s", {"value": value})
    else:
        rows = run_dicts(
            db,
            f"{select} WHERE submission_id = (SELECT submission_id FROM ledger_store.submissions "
            "WHERE idempotency_key = %(value)s) ORDER BY stream_seq",
            {"value": target},
        )
    if not rows:
        raise ProofError(f"no entry or submission matches {target!r}")
    return rows


def _checkpoint(db: Database, checkpoint_id: int | None) -> StoredCheckpoint:
    checkpoint = find_checkpoint(db, checkpoint_id=checkpoint_id)
    if checkpoint is None:
        raise ProofError(
            "no checkpoint yet: run `ledger checkpoint`"
            if checkpoint_id is None
            else f"no checkpoint with id {checkpoint_id}"
        )
    if not matches_note(checkpoint):
        raise ProofDamagedError(
            f"checkpoint {checkpoint.checkpoint_id}'s row differs from its note: run `ledger verify-log`"
        )
    return checkpoint


def prove_entries(
    db: Database, target: str, checkpoint_id: int | None = None, with_payload: bool = False
) -> dict[str, Any] | list[dict[str, Any]]:
    """Inclusion bundle(s) for the entries ``target`` names, against a stored checkpoint."""
    checkpoint = _checkpoint(db, checkpoint_id)
    size = checkpoint.tree_size
    bundles = []
    for row in find_entries(db, target):
        seq = int(row["global_seq"])
        if seq > size:
            raise ProofError(
                f"entry global_seq {seq} is not covered by checkpoint {checkpoint.checkpoint_id} "
                f"(tree size {size}); run `ledger checkpoint` first"
            )
        leaf = entry_leaf_hash(check_stored_entry(row)[0])
        try:
            path = inclusion_proof_at(db, seq - 1, size)
        except TreeError as exc:
            raise ProofDamagedError(str(exc)) from None
        if not verify_inclusion(leaf, seq - 1, size, path, checkpoint.root_hash):
            raise ProofDamagedError(
                f"entry global_seq {seq} (submission {row['submission_id']}) does not verify against "
                f"checkpoint {checkpoint.checkpoint_id}: the entry or the tree was altered; run `ledger verify-log`"
            )
        record = entry_record(row, with_payload=with_payload)
        bundles.append(
            inclusion_bundle(record, seq - 1, leaf, size, path, checkpoint.root_hash, checkpoint.note)
        )
    return bundles[0] if len(bundles) == 1 else bundles


def prove_consistency(db: Database, old_size: int, new_size: int) -> dict[str, Any]:
    """Consistency bundle between two sizes, with the stored checkpoints of those sizes if any.

    Both roots are bound to a signed root: the new tree is proven a prefix of the smallest stored
    checkpoint that covers it, so a rewritten tree gives an error, never a bundle with its roots.
    """
    current = tree_size(db)
    if not 0 <= old_size <= new_size <= current:
        raise ProofError(
            f"need 0 <= OLD_SIZE <= NEW_SIZE <= {current} (the tree size), got {old_size}, {new_size}"
        )
    signed = covering_checkpoint(db, new_size)
    if signed is None:
        raise ProofError(f"no checkpoint covers tree size {new_size} yet: run `ledger checkpoint`")
    if not matches_note(signed):
        raise ProofDamagedError(
            f"checkpoint {signed.checkpoint_id}'s row differs from its note: run `ledger verify-log`"
        )
    try:
        old_root, new_root, proof = consistency_at(db, old_size, new_size)
        to_signed = consistency_proof_at(db, new_size, signed.tree_size)
    except TreeError as exc:
        raise ProofDamagedError(str(exc)) from None
    if not verify_consistency(old_size, new_size, old_root, new_root, proof) or not verify_consistency(
        new_size, signed.tree_size, new_root, signed.root_hash, to_signed
    ):
        raise ProofDamagedError(
            f"the stored tree gives roots or a consistency proof that do not verify against checkpoint "
            f"{signed.checkpoint_id}: run `ledger verify-log`"
        )
    old = find_checkpoint(db, tree_size=old_size) if old_size else None
    new = find_checkpoint(db, tree_size=new_size) if new_size else None
    for checkpoint in (old, new):
        if checkpoint is not None and checkpoint.root_hash != (old_root if checkpoint is old else new_root):
            raise ProofDamagedError(
                f"checkpoint {checkpoint.checkpoint_id} signed a different root for size {checkpoint.tree_size} "
                "than the stored tree has: run `ledger verify-log`"
            )
    return consistency_bundle(
        old_size,
        new_size,
        old_root,
        new_root,
        proof,
        old.note if old else None,
        new.note if new else None,
    )


def export_log(db: Database, out: Path, *, with_payload: bool = False) -> str:
    """Write ``checkpoints/``, ``proofs/`` (consistency between successive sizes) and ``entries.jsonl``."""
    checkpoints = list_checkpoints(db)
    if not checkpoints:
        raise ProofError("no checkpoint yet: run `ledger checkpoint`")
    (out / "checkpoints").mkdir(parents=True, exist_ok=True)
    (out / "proofs").mkdir(exist_ok=True)
    for checkpoint in checkpoints:
        (out / "checkpoints" / f"checkpoint-{checkpoint.checkpoint_id:08d}.note").write_text(
            checkpoint.note, encoding="utf-8"
        )
    sizes = sorted({checkpoint.tree_size for checkpoint in checkpoints})
    for old, new in pairwise(sizes):
        bundle = prove_consistency(db, old, new)
        (out / "proofs" / f"consistency-{old}-{new}.json").write_text(json.dumps(bundle, indent=2) + "\n")
    last, count = 0, 0
    with (out / "entries.jsonl").open("w", encoding="utf-8") as handle:
        while last < sizes[-1]:
            rows = read_entries(db, last, EXPORT_BATCH, sizes[-1])
            if not rows:
                break
            for row in rows:
                handle.write(
                    json.dumps(entry_record(row, with_payload=with_payload), ensure_ascii=False) + "\n"
                )
            last, count = int(rows[-1]["global_seq"]), count + len(rows)
    return (
        f"exported {len(checkpoints)} checkpoint(s), {max(len(sizes) - 1, 0)} consistency proof(s) and "
        f"{count} entries to {out}"
    )
