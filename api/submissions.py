"""``/v1/submissions``: listing (keyset by global sequence), detail, and reasoning-step proofs."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query
from sqlalchemy import Connection

from api.db import db_connection
from api.models import HEX32, Entry, Step, StepProof, Submission, SubmissionDetail, SubmissionPage
from api.problems import ApiProblem, problem_responses
from engine.canonical import from_hex
from engine.merkle import cournot_root
from engine.sentinel.challenges import MerkleProofPacket
from ledger.store.records import STEP_COLUMNS, StoredStep, ledger_entry, select_entries, stored_step
from ledger.translog.db import run, run_dicts

__all__ = ["router"]

router = APIRouter(prefix="/v1/submissions", tags=["submissions"])
Db = Annotated[Connection, Depends(db_connection)]
SubmissionId = Annotated[str, Path(pattern=HEX32, description="0x + 64 lowercase hex digits")]
MAX_SEQ = 2**63 - 1

_SUBMISSION_COLUMNS = (
    "s.submission_id, s.idempotency_key, s.market_id, s.bundle_id, s.status, s.engine_version, "
    "e.global_seq AS first_seq, s.received_at, s.appended_at"
)
_FIRST_ENTRY = (
    "FROM ledger_store.entries e JOIN ledger_store.submissions s ON s.submission_id = e.submission_id "
    "WHERE e.stream_seq = 1"
)


def _stamp(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _submission(row: dict[str, Any]) -> Submission:
    return Submission(
        **{**row, "received_at": _stamp(row["received_at"]), "appended_at": _stamp(row["appended_at"])}
    )


@router.get("", response_model=SubmissionPage, responses=problem_responses(401, 422, 503))
def list_submissions(
    db: Db,
    market_id: Annotated[str | None, Query(max_length=512, pattern=r"^[^\x00]*$")] = None,
    status: Literal["audited", "rejected", "por_verified"] | None = None,
    after: Annotated[
        int, Query(ge=0, le=MAX_SEQ, description="return submissions whose first_seq > after")
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> SubmissionPage:
    """Submissions in global order, ``limit`` at a time, starting after global sequence ``after``."""
    params = {"after": after, "limit": limit, "market_id": market_id, "status": status}
    status_filter = " AND s.status = %(status)s" if status is not None else ""
    if market_id is None:  # walk the entries' primary key from `after`: first entries are dense
        query = (
            f"SELECT {_SUBMISSION_COLUMNS} {_FIRST_ENTRY} AND e.global_seq > %(after)s{status_filter} "
            "ORDER BY e.global_seq LIMIT %(limit)s"
        )
    else:  # a market's submissions by the market_id index, then each one's first entry
        query = (
            f"SELECT {_SUBMISSION_COLUMNS} FROM ledger_store.submissions s "
            "JOIN ledger_store.entries e ON e.submission_id = s.submission_id AND e.stream_seq = 1 "
            f"WHERE s.market_id = %(market_id)s AND e.global_seq > %(after)s{status_filter} "
            "ORDER BY e.global_seq LIMIT %(limit)s"
        )
    rows = run_dicts(db, query, params)
    items = [_submission(row) for row in rows]
    return SubmissionPage(items=items, next_after=items[-1].first_seq if len(items) == limit else None)


def _header(db: Connection, submission_id: str) -> Submission:
    rows = run_dicts(
        db,
        f"SELECT {_SUBMISSION_COLUMNS} {_FIRST_ENTRY} AND e.submission_id = %(id)s",
        {"id": submission_id},
    )
    if not rows:
        raise ApiProblem(404, "not_found", f"no submission {submission_id}")
    return _submission(rows[0])


def _steps(db: Connection, submission_id: str) -> list[StoredStep]:
    rows = run(
        db,
        f"SELECT {STEP_COLUMNS} FROM ledger_store.trace_steps WHERE submission_id = %(id)s ORDER BY step_index",
        {"id": submission_id},
    )
    return [stored_step(row) for row in rows]


def _entries(db: Connection, submission_id: str) -> list[Entry]:
    """The submission's entries in stream order (the response shows the columns :class:`Entry` names)."""
    rows = run(db, select_entries("submission_id = %(id)s ORDER BY stream_seq"), {"id": submission_id})
    stored = [ledger_entry(row) for row in rows]
    return [Entry(**dataclasses.asdict(entry), payload=entry.payload) for entry in stored]


def _payload_of(entries: list[Entry], kind: str) -> dict[str, Any] | None:
    for entry in entries:
        if entry.kind == kind and isinstance(entry.payload, dict):
            payload: dict[str, Any] = entry.payload
            return payload
    return None


@router.get(
    "/{submission_id}", response_model=SubmissionDetail, responses=problem_responses(401, 404, 422, 503)
)
def get_submission(submission_id: SubmissionId, db: Db) -> SubmissionDetail:
    """A submission's entries (with canonical payloads), steps, verdict and roots."""
    header = _header(db, submission_id)
    entries = _entries(db, submission_id)
    audit = _payload_of(entries, "audit.completed")
    verdict = _payload_of(entries, "verdict.issued")
    result = audit.get("verification_result") if audit else None
    roots = (audit or {}).get("roots") or (verdict or {}).get("roots")
    return SubmissionDetail(
        submission=header,
        entries=entries,
        steps=[Step(**dataclasses.asdict(step)) for step in _steps(db, submission_id)],
        verdict=verdict.get("verdict") if verdict else None,
        roots=roots if isinstance(roots, dict) else None,
        audit_ok=result.get("ok")
        if isinstance(result, dict) and isinstance(result.get("ok"), bool)
        else None,
        rejection=_payload_of(entries, "submission.rejected"),
    )


def _committed_reasoning_root(db: Connection, submission_id: str) -> tuple[str, int]:
    rows = run_dicts(
        db,
        "SELECT payload -> 'roots' ->> 'reasoning_root' AS root, "
        "ledger_store.json_bigint(payload -> 'roots' -> 'reasoning_leaf_count') AS count "
        "FROM (SELECT payload_canonical::jsonb AS payload FROM ledger_store.entries "
        "WHERE submission_id = %(id)s AND kind = 'audit.completed') a",
        {"id": submission_id},
    )
    if not rows or rows[0]["root"] is None or rows[0]["count"] is None:
        raise ApiProblem(
            404, "no_reasoning_tree", f"submission {submission_id} has no committed reasoning root"
        )
    return str(rows[0]["root"]), int(rows[0]["count"])


@router.get(
    "/{submission_id}/steps/{index}/proof",
    response_model=StepProof,
    responses=problem_responses(401, 404, 409, 422, 503),
)
def step_proof(
    submission_id: SubmissionId, index: Annotated[int, Path(ge=0, le=2**31 - 1)], db: Db
) -> StepProof:
    """The step's Cournot Merkle proof in the reasoning tree, checked against the committed root."""
    _header(db, submission_id)
    root, count = _committed_reasoning_root(db, submission_id)
    steps = _steps(db, submission_id)
    if [step.step_index for step in steps] != list(range(len(steps))) or len(steps) != count:
        raise ApiProblem(
            409,
            "steps_do_not_match_root",
            f"the stored steps are not the {count} the reasoning root commits to",
        )
    if index >= len(steps):
        raise ApiProblem(
            404, "not_found", f"submission {submission_id} has {len(steps)} step(s); no step {index}"
        )
    leaves = [from_hex(step.step_hash) for step in steps]
    if "0x" + cournot_root(leaves).hex() != root:
        # fail closed: a proof against a root the steps do not give would not verify anyway
        raise ApiProblem(
            409, "steps_do_not_match_root", f"the stored steps do not hash to reasoning_root {root}"
        )
    packet = MerkleProofPacket.build("reasoning", leaves, index)
    if not packet.verify(root=root, leaf_count=count):
        raise ApiProblem(
            409, "steps_do_not_match_root", "the proof built from the stored steps does not verify"
        )
    step = steps[index]
    return StepProof(
        submission_id=submission_id,
        step_index=index,
        step_hash=step.step_hash,
        canonical_step=step.canonical_step,
        reasoning_root=root,
        reasoning_leaf_count=count,
        proof=packet.model_dump(),
    )
