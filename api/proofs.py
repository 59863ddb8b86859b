"""RFC 6962 proofs and checkpoints: ``/v1/entries/{seq}/proof``, ``/v1/consistency``, ``/v1/checkpoints/latest``.

Every proof is verified with the engine's RFC 6962 verifier before it is sent: a damaged tree
answers a 500 problem that says so, never a proof that fails at the client.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import PlainTextResponse
from sqlalchemy import Connection

from api.db import db_connection
from api.models import ConsistencyProof, EntryProof
from api.problems import ApiProblem, problem_responses
from engine.merkle.rfc6962 import verify_inclusion
from ledger.translog.bundles import entry_record, inclusion_bundle
from ledger.translog.checkpoints import StoredCheckpoint, find_checkpoint, matches_note
from ledger.translog.db import run_dicts
from ledger.translog.leaves import check_stored_entry, entry_leaf_hash
from ledger.translog.proving import ProofDamagedError, ProofError, prove_consistency
from ledger.translog.tree import ENTRIES, ENTRY_COLUMNS, TreeError, inclusion_proof_at, tree_size

__all__ = ["NOTE_MEDIA_TYPE", "latest_note", "router"]

router = APIRouter(tags=["transparency log"])
Db = Annotated[Connection, Depends(db_connection)]
MAX_SEQ = 2**63 - 1
NOTE_MEDIA_TYPE = "text/plain; charset=utf-8"
DAMAGED = "run `ledger verify-log` on the server"


def _damaged(detail: str) -> ApiProblem:
    return ApiProblem(500, "log_damaged", f"{detail}; {DAMAGED}")


def _checkpoint(db: Connection, size: int | None) -> StoredCheckpoint:
    checkpoint = find_checkpoint(db, tree_size=size) if size is not None else find_checkpoint(db)
    if checkpoint is None:
        raise ApiProblem(
            404,
            "no_checkpoint",
            "the log has no signed checkpoint yet"
            if size is None
            else f"no signed checkpoint of size {size}",
        )
    if not matches_note(checkpoint):
        raise _damaged(f"checkpoint {checkpoint.checkpoint_id}'s row differs from its signed note")
    return checkpoint


@router.get(
    "/v1/entries/{global_seq}/proof",
    response_model=EntryProof,
    responses=problem_responses(401, 404, 422, 500, 503),
)
def entry_proof(
    global_seq: Annotated[int, Path(ge=1, le=MAX_SEQ)],
    db: Db,
    size: Annotated[
        int | None,
        Query(ge=1, le=MAX_SEQ, description="tree size of a signed checkpoint (default: the latest)"),
    ] = None,
) -> dict[str, Any]:
    """Inclusion proof of entry ``global_seq`` (leaf ``global_seq - 1``) against a signed checkpoint."""
    checkpoint = _checkpoint(db, size)
    if global_seq > checkpoint.tree_size:
        raise ApiProblem(
            404,
            "not_covered",
            f"entry {global_seq} is not covered by the checkpoint of size {checkpoint.tree_size}",
        )
    rows = run_dicts(
        db, f"SELECT {ENTRY_COLUMNS} FROM {ENTRIES} WHERE global_seq = %(seq)s", {"seq": global_seq}
    )
    if not rows:
        raise _damaged(f"entry {global_seq} is covered by a checkpoint but missing")
    content_hash, mismatch = check_stored_entry(rows[0])
    if mismatch is not None:
        raise _damaged(f"entry {global_seq}: {mismatch}")
    leaf = entry_leaf_hash(content_hash)
    try:
        path = inclusion_proof_at(db, global_seq - 1, checkpoint.tree_size)
    except TreeError as exc:
        raise _damaged(str(exc)) from None
    if not verify_inclusion(leaf, global_seq - 1, checkpoint.tree_size, path, checkpoint.root_hash):
        raise _damaged(f"entry {global_seq} does not verify against checkpoint {checkpoint.checkpoint_id}")
    record = entry_record(rows[0], with_payload=True)
    return inclusion_bundle(
        record, global_seq - 1, leaf, checkpoint.tree_size, path, checkpoint.root_hash, checkpoint.note
    )


@router.get(
    "/v1/consistency",
    response_model=ConsistencyProof,
    responses=problem_responses(400, 401, 404, 422, 500, 503),
)
def consistency(
    db: Db,
    from_size: Annotated[int, Query(alias="from", ge=0, le=MAX_SEQ, description="older tree size M")],
    to_size: Annotated[int, Query(alias="to", ge=0, le=MAX_SEQ, description="newer tree size N")],
) -> dict[str, Any]:
    """Consistency proof that the tree of ``from`` leaves is a prefix of the tree of ``to`` leaves."""
    if from_size > to_size:
        raise ApiProblem(400, "bad_sizes", f"from ({from_size}) must not exceed to ({to_size})")
    current = tree_size(db)
    if to_size > current:
        raise ApiProblem(404, "beyond_tree", f"the tree holds {current} leaves; no tree of size {to_size}")
    try:
        return prove_consistency(db, from_size, to_size)
    except ProofDamagedError as exc:
        raise _damaged(str(exc)) from None
    except ProofError as exc:  # no signed checkpoint covers the size yet
        raise ApiProblem(404, "not_covered", str(exc)) from None


def latest_note(db: Connection) -> str:
    """The latest signed checkpoint note (404 problem if there is none)."""
    return _checkpoint(db, None).note


NOTE_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "the signed note"}
}


@router.get(
    "/v1/checkpoints/latest",
    response_class=PlainTextResponse,
    responses={**NOTE_RESPONSE, **problem_responses(401, 404, 503)},
)
def checkpoint_latest(db: Db) -> PlainTextResponse:
    """The latest checkpoint as its C2SP signed note (text/plain)."""
    return PlainTextResponse(latest_note(db), media_type=NOTE_MEDIA_TYPE)
