"""Parallel verify: pages checked by workers and by the waiting parent come back complete and in order."""

from __future__ import annotations

import pytest

from ledger.connect import create_ledger_engine
from ledger.store.read import snapshot
from ledger.verify.checks import check_submission
from ledger.verify.source import iter_groups
from ledger.verify.workers import checked_pages
from tests.helpers.database import tamper
from tests.helpers.replay import build_ledger

pytestmark = pytest.mark.integration


def test_pages_checked_in_workers_and_inline_match_the_serial_pass(migrated_database_url: str) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=12)
    tamper(
        url,
        "UPDATE ledger_store.entries SET payload_hash = %(h)s WHERE submission_id = %(s)s AND stream_seq = 1",
        {"h": "0x" + "00" * 32, "s": stored[10].submission_id},
    )
    engine = create_ledger_engine(url)
    try:
        with snapshot(engine) as conn:
            serial = [
                (len(page), sorted(p.code for group in page for p in check_submission(group)))
                for page in iter_groups(conn, page_size=3)
            ]
            parallel = [
                (result.submissions, sorted(p.code for p in result.problems))
                for result in checked_pages(conn, url, jobs=1, page_size=3)
            ]
    finally:
        engine.dispose()
    assert len(serial) == 4
    assert [result for result in parallel if result[0]] == serial  # a full last page leaves an empty one
    assert ["payload_hash_mismatch"] in [codes for _, codes in serial]


def test_ramped_pages_give_the_report_of_one_page(
    migrated_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One job reads a small first page and doubles it (``FIRST_PAGE``): the same problems, each once."""
    from ledger.verify import runner

    url = migrated_database_url
    stored = build_ledger(url, limit=12)
    for index in (0, 2, 6, 11):  # in the first page, the second, a ramped one and the last
        tamper(
            url,
            "UPDATE ledger_store.entries SET payload_hash = %(h)s WHERE submission_id = %(s)s AND stream_seq = 1",
            {"h": "0x" + "00" * 32, "s": stored[index].submission_id},
        )
    engine = create_ledger_engine(url)
    try:
        whole = runner.run_verify(engine, jobs=1, page_size=1000)
        monkeypatch.setattr(runner, "FIRST_PAGE", 1)
        ramped = runner.run_verify(engine, jobs=1, page_size=4)  # pages of 1, 2, 4, 4, 1 submissions
    finally:
        engine.dispose()
    assert ramped.submissions == whole.submissions == 12
    assert ramped.counts == whole.counts
    assert ramped.counts["error:payload_hash_mismatch"] == 4
    assert sorted(p.to_json()["submission_id"] for p in ramped.problems) == sorted(
        p.to_json()["submission_id"] for p in whole.problems
    )
