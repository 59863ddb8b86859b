"""Replay of verified PoR packs: re-verify every stored ``por.verified`` pack and compare reports.

Reads one consistent snapshot; the stored pack is rebuilt exactly as received and verified again by
the current :mod:`engine.por_pack`; the fresh report must equal the stored one as canonical JSON.
Read-only: nothing is appended.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from psycopg import Connection

from engine.por_pack.stored import StoredPackError, reverify
from ledger.store.records import entry_columns, ledger_entry

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
        f"SELECT s.market_id, {entry_columns('e')} FROM ledger_store.entries e "
        "JOIN ledger_store.submissions s ON s.submission_id = e.submission_id "
        f"WHERE {' AND '.join(clauses)} ORDER BY e.global_seq",
        params,
    )
    for market_id, *entry_row in cursor:
        entry = ledger_entry(entry_row)
        payload = entry.payload
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
                entry.submission_id, entry.global_seq, market_id, stored_status, None, False, str(exc)
            )
            continue
        except Exception as exc:  # nor can a pack the verifier fails on be identical: a named divergence
            error = f"re-verification failed: {type(exc).__name__}: {exc}"
            yield PoRReplayResult(
                entry.submission_id, entry.global_seq, market_id, stored_status, None, False, error
            )
            continue
        yield PoRReplayResult(
            entry.submission_id,
            entry.global_seq,
            market_id,
            stored_status,
            result.report.status,
            result.identical,
        )
