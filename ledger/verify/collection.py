"""Fewer cyclic garbage collections while ``ledger verify`` reads and checks the ledger.

Verify allocates rows by the hundred thousand and keeps a page (and the proven leaves) alive
while it checks them; with the interpreter's default thresholds the young generation is
collected every 700 allocations and the older ones re-scan everything alive, about a sixth of
verify's CPU (measured). Verify creates no reference cycles on its normal path (a run leaves
none to collect), so collecting the young generation every :data:`YOUNG_THRESHOLD` allocations
instead loses nothing; collection is never switched off, so a cycle made elsewhere is still freed.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["YOUNG_THRESHOLD", "fewer_collections"]

YOUNG_THRESHOLD = 100_000

_LOCK = threading.Lock()


class _Held:
    """How many uses are open, and the thresholds found when the first one started."""

    depth = 0
    saved: tuple[int, ...] = ()


@contextmanager
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
