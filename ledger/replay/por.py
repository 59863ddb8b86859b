"""Replay of verified PoR packs: re-verify every stored ``por.verified`` pack and compare reports.

Reads one consistent snapshot; the stored pack is rebuilt exactly as received and verified again by
the current :mod:`engine.por_pack`; the fresh report must equal the stored one as canonical JSON.
Read-only: nothing is appended.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from psycopg import Connection

from engine.por_pack.stored import StoredPackError, reverify

__all__ = ["PoRReplayResult", "replay_por_packs"]


@dataclass(frozen=True)
class PoRReplayResult:
    """One stored pack re-verified: ``identical``, or why not (``error`` when it could not be rebuilt)."""

    submission_id: str
    global_seq: int
    market_id: str | None
    stored_status: str | None
    replayed_status: str | None
    identical: bool
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return dict(self.__dict__)


def replay_por_packs(
    conn: Connection[Any], *, submission: str | None = None, market: str | None = None
) -> Iterator[PoRReplayResult]:
    """Re-verify the selected ``por.verified`` entries in ledger order."""
    clauses, params = ["e.kind = 'por.verified'"], {}
    if submission is not None:
        clauses.append("e.submission_id = %(submission)s")
        params["submission"] = submission
    if market is not None:
        clauses.append("s.market_id = %(market)s")
        params["market"] = market
    cursor = conn.execute(
        "SELECT e.submission_id, e.global_seq, s.market_id, e.payload_canonical FROM ledger_store.entries e "
        "JOIN ledger_store.submissions s ON s.submission_id = e.submission_id "
        f"WHERE {' AND '.join(clauses)} ORDER BY e.global_seq",
        params,
    )
    for submission_id, global_seq, market_id, text in cursor:
        payload = json.loads(text)
        stored_report = payload.get("report") or {}
        stored_status = stored_report.get("status")
        try:
            result = reverify(payload["stored_pack"], stored_report)
        except (
            StoredPackError,
            KeyError,
            TypeError,
        ) as exc:  # a stored pack we cannot rebuild is a divergence
            yield PoRReplayResult(
                submission_id, int(global_seq), market_id, stored_status, None, False, str(exc)
            )
            continue
        except Exception as exc:  # nor can a pack the verifier fails on be identical: a named divergence
            error = f"re-verification failed: {type(exc).__name__}: {exc}"
            yield PoRReplayResult(
                submission_id, int(global_seq), market_id, stored_status, None, False, error
            )
            continue
        yield PoRReplayResult(
            submission_id, int(global_seq), market_id, stored_status, result.report.status, result.identical
        )
