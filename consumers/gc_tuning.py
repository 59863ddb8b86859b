"""Garbage-collector settings for a consumer process that holds whole batches in memory.

A batch of audited drafts is about a million small container objects (pydantic models, payload
dicts, step lists) that live for seconds: they survive the young collections, land in the oldest
generation and then die by reference counting. With CPython's default thresholds (700, 10, 10)
that churn triggers a full collection every few batches, and a full collection walks every live
object (the batches in flight plus everything imported at start-up): measured at ≈ 200 ms each and
a third of the consumer's CPU on a backlog (docs/benchmarks.md, "Ingestion, round 2").

:func:`tuned_gc` keeps automatic collection on (cyclic garbage is still collected, memory stays
flat) but (1) moves the objects that exist once start-up is over into the permanent generation
(``gc.freeze``), so no collection walks the imported modules again, and (2) collects the young
generation every 50,000 net allocations instead of 700, the middle one every 100 young collections
instead of 10 and the oldest one every 100 middle ones instead of 10. A batch's objects rarely form
cycles (a few hundred cyclic objects over thousands of records, measured), so garbage found only
by the rarer older collections stays small. Nothing about the ledger depends on when collection
runs.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["THRESHOLDS", "tuned_gc"]

THRESHOLDS = (50_000, 100, 100)
"""``gc.set_threshold`` while consuming: young, middle, old (CPython's defaults: 700, 10, 10)."""


@contextlib.contextmanager
def tuned_gc(enabled: bool = True) -> Iterator[None]:
    """Apply :data:`THRESHOLDS` and freeze the start-up heap for the block; restore both after.

    With ``enabled`` false nothing changes (an embedding process that tunes its own collector).
    """
    if not enabled:
        yield
        return
    previous = gc.get_threshold()
    gc.collect()  # leave no garbage behind in what is frozen
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*previous)
        gc.unfreeze()
