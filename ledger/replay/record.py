"""``ledger replay --record``: append a ``replay.verified`` entry to each replayed submission's chain.

The entry goes through the store's append API for follow-up entries
(:meth:`ledger.store.ledger_store.LedgerStore.append_to_stream`): chained after the submission's head entry,
under the global append lock, with optimistic concurrency on the head's ``stream_seq``. A chain
that moved since the replay read it is retried once at its new head; when it moved again the
recorder raises :class:`~ledger.errors.LedgerError` (fail closed: no outcome goes unrecorded silently).

The payload says what this replay found, under which engine version; it carries no clock value,
so it is as reproducible as the replay itself. The entry's ``engine_version`` column is the
replaying engine's.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from engine.version import ENGINE_VERSION
from ledger.errors import LedgerError
from ledger.replay.runner import SubmissionReplay
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import EntryDraft

__all__ = ["RECORD_TRIES", "ReplayRecorder", "replay_payload"]

# Tries per outcome. Retrying is safe: a stale append wrote nothing (the store checks the head under
# its append lock), and the payload does not depend on the head, so re-chaining it after the new head
# records the same finding. A plain bounded loop rather than tenacity: the next try needs the head
# from the failed result and must not wait, which a retry decorator would only hide.
RECORD_TRIES = 2


def replay_payload(item: SubmissionReplay, *, live: bool) -> dict[str, Any]:
    """The ``replay.verified`` payload for one outcome (no diff texts: those stay in the report)."""
    first = None
    if item.first is not None:
        first = {
            "component": item.first.component,
            "step_index": item.first.step_index,
            "step_id": item.first.step_id,
            "root_field": item.first.root_field,
        }
    return {
        "status": item.status,
        "engine_version": ENGINE_VERSION,
        "recorded_engine_version": item.recorded_engine_version,
        "live": live,
        "steps": item.steps,
        "por_root": item.por_root,
        "differing": list(item.differing),
        "first_difference": first,
        "reasoning": [{"global_seq": r.global_seq, "status": r.status} for r in item.reasoning],
        "error": item.error,
    }


class ReplayRecorder:
    """Appends one ``replay.verified`` entry per outcome; counts what happened."""

    def __init__(self, engine: Engine, *, live: bool) -> None:
        """Bind to the ledger."""
        self.store = LedgerStore(engine)
        self.live = live
        self.counts = {"created": 0, "existing": 0}

    def __call__(self, item: SubmissionReplay) -> None:
        """Record ``item`` at its submission's head (retried once at a moved head).

        Raises :class:`~ledger.errors.LedgerError` when the chain moved on every try.
        """
        entry = EntryDraft("replay.verified", replay_payload(item, live=self.live))
        head = item.head_stream_seq
        for _ in range(RECORD_TRIES):
            result = self.store.append_to_stream(
                item.submission_id, [entry], expected_stream_seq=head, engine_version=ENGINE_VERSION
            )
            if result.status != "stale":
                self.counts[result.status] += 1
                return
            head = max(stored.stream_seq for stored in result.entries)
        raise LedgerError(
            f"replay.verified for {item.submission_id} not recorded: its chain kept moving ({RECORD_TRIES} tries)"
        )

    def summary(self) -> dict[str, Any]:
        """JSON-ready counts for the report."""
        return {"kind": "replay.verified", **self.counts}
