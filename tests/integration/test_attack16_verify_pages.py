"""``ledger verify`` with one job reads a first page of 50 submissions, doubling to ``page_size``.

Attacks on the ramp with a real ledger: a tamper in the last submission of a page and the first of
the next at every size change (50 | 100 | 200), in the very last submission; submissions appended
while verify runs (its snapshot must not see them, nor lose any it does see); and a page size
below one, which must be refused rather than verify part of the ledger.
"""

from __future__ import annotations

from typing import Any

import pytest

from ledger.connect import create_ledger_engine
from ledger.store.ledger_store import LedgerStore
from ledger.verify import runner
from tests.helpers.database import tamper
from tests.helpers.replay import build_ledger, corpus_drafts

pytestmark = pytest.mark.integration

_ZERO = "0x" + "00" * 32


def _break(url: str, submission_id: str) -> None:
    tamper(
        url,
        "UPDATE ledger_store.entries SET payload_hash = %(h)s WHERE submission_id = %(s)s AND stream_seq = 1",
        {"h": _ZERO, "s": submission_id},
    )


def _flagged(report: Any) -> list[str]:
    return sorted(
        {str(p.to_json()["submission_id"]) for p in report.problems if p.code == "payload_hash_mismatch"}
    )


def test_tampers_at_every_page_boundary_of_the_ramp_are_found(migrated_database_url: str) -> None:
    url = migrated_database_url
    stored = build_ledger(url, copies=6)  # 222 submissions: pages of 50, 100, 72 (page_size 1000)
    ids = sorted(item.submission_id for item in stored)  # the pages' order (C collation: hex ids)
    assert len(ids) == 222
    chosen = [ids[i] for i in (0, 48, 49, 50, 51, 149, 150, 151, 221)]
    for sid in chosen:
        _break(url, sid)
    engine = create_ledger_engine(url)
    try:
        ramped = runner.run_verify(engine, jobs=1, translog=False)
        flat = runner.run_verify(
            engine, jobs=1, translog=False, page_size=50
        )  # no ramp: 50 is the first page
        tight = runner.run_verify(engine, jobs=1, translog=False, page_size=100)  # ramp capped at 100
    finally:
        engine.dispose()
    for report in (ramped, flat, tight):
        assert report.submissions == 222
        assert _flagged(report) == sorted(chosen)
        assert report.counts["error:payload_hash_mismatch"] == len(chosen)


def test_submissions_appended_during_verify_are_not_seen_and_none_is_lost(migrated_database_url: str) -> None:
    url = migrated_database_url
    first = build_ledger(url, copies=3)  # 111 submissions: pages of 50 and 61
    later = corpus_drafts(6)[len(first) :]  # 111 more, appended while the first page is checked
    appended: list[int] = []

    def progress(done: int, total: int, steps: int, _: int) -> None:
        if not appended:
            with LedgerStore(url) as store:
                appended.append(len(store.append_batch(later)))

    engine = create_ledger_engine(url)
    try:
        during = runner.run_verify(engine, jobs=1, progress=progress)
        after = runner.run_verify(engine, jobs=1)
    finally:
        engine.dispose()
    assert appended == [111]
    assert during.submissions == 111 and not during.problems, during.counts
    assert after.submissions == 222 and not after.problems, after.counts


@pytest.mark.parametrize("page_size", [0, -1])
def test_a_page_size_below_one_is_refused(migrated_database_url: str, page_size: int) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=3)
    _break(url, max(item.submission_id for item in stored))  # in the last page read
    engine = create_ledger_engine(url)
    try:
        with pytest.raises(ValueError, match="page_size"):
            runner.run_verify(engine, jobs=1, page_size=page_size)
    finally:
        engine.dispose()
