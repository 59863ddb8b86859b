"""Parallel ``ledger verify``: worker processes check pages under the parent's exported snapshot.

The parent opens its REPEATABLE READ snapshot, exports it (``pg_export_snapshot()``) and computes
the first ``submission_id`` of every page; each worker imports the snapshot (``SET TRANSACTION
SNAPSHOT``), reads its page with the same two queries as the serial path and returns only the
problems it found. Every worker thus sees exactly the parent's view of the ledger, reading and
checking in parallel (the way ``pg_dump --jobs`` shares one snapshot). The parent checks pages
from the end of the queue while it waits. Workers are forked when no other thread runs (they start
at once), else started by a fork server (:func:`worker_context`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Generator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_all_start_methods, get_context
from multiprocessing.context import BaseContext
from typing import Any

import psycopg
from psycopg import Connection

from ledger.collection import fewer_collections
from ledger.connect import libpq_url
from ledger.verify.checks import check_submission
from ledger.verify.problems import Problem
from ledger.verify.source import SubmissionGroup, load_page

__all__ = ["PageResult", "checked", "checked_pages", "fork_is_safe", "page_starts", "worker_context"]

_CONNECTIONS: dict[str, Connection[Any]] = {}
_SNAPSHOT_ID = re.compile(r"[0-9A-Fa-f]+(-[0-9A-Fa-f]+)+")


@dataclass(frozen=True)
class PageResult:
    """What one page held, what was wrong in it, and ``(global_seq, entry_hash)`` of every entry
    whose stored hashes its content proved (for the transparency log's check)."""

    submissions: int
    steps: int
    problems: list[Problem]
    verified: list[tuple[int, str]] = field(default_factory=list)


def page_starts(conn: Connection[Any], page_size: int) -> list[str]:
    """The submission id *before* each page (``""`` for the first), in ``submission_id`` order."""
    rows = conn.execute(
        "SELECT submission_id FROM (SELECT submission_id, row_number() OVER (ORDER BY submission_id) AS n "
        "FROM ledger_store.submissions) s WHERE n %% %(size)s = 0 ORDER BY submission_id",
        {"size": page_size},
    ).fetchall()
    return ["", *(str(row[0]) for row in rows)]


def _connection(url: str) -> Connection[Any]:
    conn = _CONNECTIONS.get(url)
    if conn is None or conn.closed:
        conn = psycopg.connect(libpq_url(url))
        _CONNECTIONS[url] = conn
    return conn


def check_page(url: str, snapshot_id: str, after: str, page_size: int) -> PageResult:
    """Worker: read one page under the exported snapshot and check every submission in it."""
    with fewer_collections():  # as in the parent (a forked worker has its raised threshold already)
        conn = _connection(url)
        try:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            conn.execute(f"SET TRANSACTION SNAPSHOT '{snapshot_id}'")
            groups = load_page(conn, after, page_size)
        finally:
            conn.rollback()
        return checked(groups)


def checked(groups: list[SubmissionGroup]) -> PageResult:
    """Check every submission of a page."""
    verified: list[tuple[int, str]] = []
    problems = [problem for group in groups for problem in check_submission(group, verified)]
    return PageResult(len(groups), sum(len(group.steps) for group in groups), problems, verified)


def fork_is_safe() -> bool:
    """Can workers be forked from this process: ``fork`` exists and no other thread runs (a thread
    could hold a lock at the fork that a child would then wait on forever)?"""
    return "fork" in get_all_start_methods() and threading.active_count() == 1


def worker_context() -> BaseContext:
    """How workers start: forked when :func:`fork_is_safe` (at once, with every module already
    imported), else from a fork server that imports this module once (about a second)."""
    if fork_is_safe():
        return get_context("fork")
    context = get_context("forkserver")
    context.set_forkserver_preload([__name__])  # imported once by the server, not by every worker
    return context


def checked_pages(
    conn: Connection[Any], url: str, jobs: int, page_size: int
) -> Generator[PageResult, None, None]:
    """Export ``conn``'s snapshot and check every page in ``jobs`` processes (results in page order).

    While the next page in order is not done, this process checks pages too, from the end of the
    queue (those no worker has taken yet), with ``conn`` itself: the workers' start is not time
    lost, and a small ledger is never slower with workers than without.
    """
    row = conn.execute("SELECT pg_export_snapshot()").fetchone()
    assert row is not None
    snapshot_id = str(row[0])
    if not _SNAPSHOT_ID.fullmatch(snapshot_id):
        raise ValueError(f"unexpected snapshot id {snapshot_id!r}")
    starts = page_starts(conn, page_size)
    context = worker_context()
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        tasks = [pool.submit(check_page, url, snapshot_id, after, page_size) for after in starts]
        inline: dict[int, PageResult] = {}
        taken = len(tasks)  # tasks[taken:] were cancelled and checked here
        for index, task in enumerate(tasks):
            while index < taken - 1 and not task.done() and tasks[taken - 1].cancel():
                taken -= 1
                inline[taken] = checked(load_page(conn, starts[taken], page_size))
            yield inline.pop(index) if index >= taken else task.result()
