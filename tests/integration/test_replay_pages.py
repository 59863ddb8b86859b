"""Replay's reading: a small first page, then full pages, cover the selection once, in ledger order;
the totals are counted only for a progress callback or ``jobs=0`` and never change the outcome."""

from __future__ import annotations

import pytest

from ledger.connect import create_ledger_engine
from ledger.replay.runner import run_replay
from ledger.replay.source import ReplaySelection, iter_replay_pages
from ledger.store.read import snapshot
from tests.helpers.replay import build_ledger

pytestmark = pytest.mark.integration


def test_a_small_first_page_then_full_pages_read_every_submission_once_in_ledger_order(
    migrated_database_url: str,
) -> None:
    stored = build_ledger(migrated_database_url, limit=12)
    engine = create_ledger_engine(migrated_database_url)
    try:
        with snapshot(engine) as conn:
            one_page = list(iter_replay_pages(conn, ReplaySelection(), page_size=100))
            paged = list(iter_replay_pages(conn, ReplaySelection(), page_size=5, first_page=2))
            exact = list(iter_replay_pages(conn, ReplaySelection(), page_size=5, first_page=len(stored)))
    finally:
        engine.dispose()
    assert [len(page) for page in one_page] == [len(stored)]
    assert [len(page) for page in paged] == [2, 5, 5]
    assert [len(page) for page in exact] == [len(stored)]
    expected = [item.submission_id for item in stored]
    assert [case.submission_id for case in one_page[0]] == expected
    assert [case for page in paged for case in page] == one_page[0]
    assert all(case.step_texts and len(case.step_texts) == len(case.step_hashes) for case in one_page[0])


def test_replay_counts_totals_only_for_progress_and_the_outcome_is_the_same(
    migrated_database_url: str,
) -> None:
    stored = build_ledger(migrated_database_url, limit=8)
    engine = create_ledger_engine(migrated_database_url)
    seen: list[tuple[int, int, int, int]] = []
    try:
        quiet = run_replay(engine, ReplaySelection(), page_size=3)
        counted = run_replay(engine, ReplaySelection(), page_size=3, progress=lambda *args: seen.append(args))
    finally:
        engine.dispose()
    steps = sum(item.steps for item in stored)
    timing = {"elapsed_seconds": 0, "steps_per_second": 0}
    assert quiet.summary() | timing == counted.summary() | timing
    assert quiet.counts["identical"] == len(stored) and quiet.steps == steps and quiet.ok
    assert seen[-1] == (len(stored), len(stored), steps, steps)
    assert [done for done, *_ in seen] == list(range(1, len(stored) + 1))
