"""Reading the ledger consistently: one snapshot for a whole run, and how many workers to page with."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from psycopg import Connection, IsolationLevel
from sqlalchemy import Engine

__all__ = ["auto_jobs", "read_ahead", "snapshot"]

_Item = TypeVar("_Item")


@contextlib.contextmanager
def snapshot(engine: Engine) -> Iterator[Connection[Any]]:
    """A read-only REPEATABLE READ psycopg connection: one consistent view for the whole run."""
    raw = engine.raw_connection()
    try:
        conn = raw.driver_connection
        assert isinstance(conn, Connection)
        conn.rollback()
        previous = conn.isolation_level, conn.read_only
        conn.isolation_level, conn.read_only = IsolationLevel.REPEATABLE_READ, True
        try:
            yield conn
        finally:
            conn.rollback()
            conn.isolation_level, conn.read_only = previous
    finally:
        raw.close()


def auto_jobs(submissions: int, minimum: int) -> int:
    """Worker processes for ``--jobs 0``: inline below ``minimum`` submissions (starting workers
    costs about a second each), else one per usable CPU, at most 8."""
    if submissions < minimum:
        return 1
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(8, cpus))


def read_ahead(items: Iterator[_Item]) -> Generator[_Item, None, None]:
    """``items`` in order, the next one read in a thread while the caller works on the current one.

    For page readers: the database decompresses and sends page k+1 while page k is checked (the
    socket wait releases the GIL). Only the one reader thread advances ``items``; closing this
    iterator early waits for the read under way, so the connection is idle when the caller's
    transaction ends. A caller whose work on an item can raise must close it explicitly (e.g.
    ``contextlib.closing``) before its transaction ends: the traceback keeps an abandoned generator
    alive, and with it a read that may still be using the connection.
    """

    def following() -> list[_Item]:
        for item in items:  # one step of the iterator: [item], or [] at its end
            return [item]
        return []

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="read-ahead") as reader:
        pending = reader.submit(following)
        while True:
            current = pending.result()
            if not current:
                return
            pending = reader.submit(following)
            yield current[0]
