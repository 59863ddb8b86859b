"""Cyclic garbage-collector settings for the ledger's bulk jobs: one home for both uses.

CPython collects the young generation every 700 net allocations and re-scans older generations
every 10 younger collections. Jobs that hold a page or a batch of a hundred thousand small objects
alive for a while pay for that churn without freeing anything: collection never frees what
reference counting frees anyway, only cycles. Both settings below keep automatic collection on
(cyclic garbage is still collected, memory stays bounded) and restore the previous thresholds
when the block ends. Nothing committed depends on when collection runs.

:func:`fewer_collections` (``ledger verify`` and ``ledger replay``, and their workers; replay's
pages are the same kind of load, measured 4–6 % less CPU per step with it):
    Fewer cyclic garbage collections while ``ledger verify`` reads and checks the ledger.

    Verify allocates rows by the hundred thousand and keeps a page (and the proven leaves) alive
    while it checks them; with the interpreter's default thresholds the young generation is
    collected every 700 allocations and the older ones re-scan everything alive, about a sixth of
    verify's CPU (measured). Verify creates no reference cycles on its normal path (a run leaves
    none to collect), so collecting the young generation every :data:`YOUNG_THRESHOLD` allocations
    instead loses nothing; collection is never switched off, so a cycle made elsewhere is still freed.

:func:`tuned_gc` (``ledger consume``):
    Garbage-collector settings for a consumer process that holds whole batches in memory.

    A batch of audited drafts is over a hundred thousand small container objects (pydantic models, payload
    dicts, step lists) that live for seconds: they survive the young collections, land in the oldest
    generation and then die by reference counting. With CPython's default thresholds (700, 10, 10)
    that churn triggers a full collection every few batches, and a full collection walks every live
    object (the batches in flight plus everything imported at start-up): measured at ≈ 200 ms each and
    a third of the consumer's CPU on a backlog (docs/benchmarks.md, "Ingestion, round 2").

    :func:`tuned_gc` keeps automatic collection on (cyclic garbage is still collected, memory stays
    bounded) but (1) moves the objects that exist once start-up is over into the permanent generation
    (``gc.freeze``), so no collection walks the imported modules again, and (2) collects the young
    generation only after 1,000,000 net allocations instead of 700 (the middle one every 100 young
    collections instead of 10, the oldest every 100 middle ones instead of 10). The young count is
    allocations minus deallocations, and a committed batch gives its objects back, so what it
    measures is the batches in flight: about 290 tracked objects per audited and prepared bundle
    (measured on the corpus), three batches of 500 at most by default (``max_in_flight`` 2 plus the
    one being audited), so a peak of about 450,000 plus the fetched records. At 500,000, the
    earlier threshold, those peaks still crossed it about once per 4,000–6,000 bundles on a
    backlog, and that young collection walked every live object of the batches: 186–211 ms of CPU,
    sometimes inside the append lock (which the other consumers then wait for); at 1,000,000 the
    same runs made none (``bench/bench_end_to_end.py --bundles 6000 --phases 1,2``, collections
    counted through ``gc.callbacks``). What still triggers one is net growth: cyclic garbage, which
    records rarely make (about 0.4 tracked objects per bundle, measured), or batches configured
    larger; either way at most 1,000,000 objects (on the order of 100 MB) wait for the next
    collection. Nothing about the ledger depends on when collection runs.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["THRESHOLDS", "YOUNG_THRESHOLD", "fewer_collections", "frozen_heap", "tuned_gc"]


YOUNG_THRESHOLD = 100_000

_LOCK = threading.Lock()


class _Held:
    """How many uses are open, and the thresholds found when the first one started."""

    depth = 0
    saved: tuple[int, ...] = ()


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Raise the young generation's threshold to :data:`YOUNG_THRESHOLD` (never lower it, and
    leave a threshold of 0, collection off, as it is) until the outermost of nested or concurrent
    uses ends; then the thresholds found at its start are restored."""
    with _LOCK:
        if _Held.depth == 0:
            _Held.saved = saved = gc.get_threshold()
            if saved[0] != 0:
                gc.set_threshold(max(saved[0], YOUNG_THRESHOLD), *saved[1:])
        _Held.depth += 1
    try:
        yield
    finally:
        with _LOCK:
            _Held.depth -= 1
            if _Held.depth == 0:
                gc.set_threshold(*_Held.saved)


THRESHOLDS = (1_000_000, 100, 100)
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


class _Frozen:
    """How many :func:`frozen_heap` blocks are open, and whether the outermost one froze the heap."""

    depth = 0
    ours = False


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Move every object alive at the start of the block into the permanent generation
    (``gc.freeze``) until the outermost of nested or concurrent uses ends, then back (``gc.unfreeze``).

    ``ledger replay`` (measured: about 3 % of its CPU in collections of the older generations,
    which re-walk the imported engine) uses it with :func:`fewer_collections`. Nothing is frozen
    when collection is off or something else already froze the heap (:func:`tuned_gc`), and only
    what this function froze is thawed. Garbage alive at the start waits for the block's end;
    nothing committed depends on when collection runs.
    """
    with _LOCK:
        if _Frozen.depth == 0:
            _Frozen.ours = gc.isenabled() and gc.get_freeze_count() == 0
            if _Frozen.ours:
                gc.freeze()
        _Frozen.depth += 1
    try:
        yield
    finally:
        with _LOCK:
            _Frozen.depth -= 1
            if _Frozen.depth == 0 and _Frozen.ours:
                _Frozen.ours = False
                gc.unfreeze()
