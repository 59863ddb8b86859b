"""Garbage-collector settings for a consumer process that holds whole batches in memory.

A batch of audited drafts is over a hundred thousand small container objects (pydantic models, payload
dicts, step lists) that live for seconds: they survive the young collections, land in the oldest
generation and then die by reference counting. With CPython's default thresholds (700, 10, 10)
that churn triggers a full collection every few batches, and a full collection walks every live
object (the batches in flight plus everything imported at start-up): measured at ≈ 200 ms each and
a third of the consumer's CPU on a backlog (docs/benchmarks.md, "Ingestion, round 2").

:func:`tuned_gc` keeps automatic collection on (cyclic garbage is still collected, memory stays
bounded) but (1) moves the objects that exist once start-up is over into the permanent generation
(``gc.freeze``), so no collection walks the imported modules again, and (2) collects the young
generation only after 500,000 net allocations instead of 700 (the middle one every 100 young
collections instead of 10, the oldest every 100 middle ones instead of 10). The young count is
allocations minus deallocations, and a committed batch gives its objects back, so the batches in
flight (a few hundred tracked objects per bundle, three batches of 500 at most by default) rarely
reach it: on a backlog the consumer then runs no collection at all, measured. What still triggers
one is net growth: cyclic garbage, which records rarely make (a few hundred cyclic objects over
thousands of records, measured), or larger batches; either way at most 500,000 objects wait for
the next collection. Nothing about the ledger depends on when collection runs.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["THRESHOLDS", "tuned_gc"]

THRESHOLDS = (500_000, 100, 100)
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
