"""Reading the ledger consistently: one snapshot for a whole run, and how many workers to page with."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from psycopg import Connection, IsolationLevel
from sqlalchemy import Engine

__all__ = ["auto_jobs", "snapshot"]


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
