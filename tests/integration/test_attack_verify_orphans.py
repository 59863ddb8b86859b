"""A submission row deleted (superuser, triggers bypassed) while its entries stay: ``ledger verify``
must report it, with ``--jobs 1`` and ``--jobs 2``, with and without the log check.

Revision 0009 replaced the entries' foreign key with an insert-time trigger, and replica mode skips
both: nothing in the schema stops the row's deletion. Its entries still hash and chain, the global
sequence has no gap and their leaves match the tree, so only a check that every entry's submission
is stored sees it."""

from __future__ import annotations

import pytest

from tests.helpers.database import query, tamper
from tests.helpers.replay import build_ledger, ledger_json, problems

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_deleted_submission_row_is_reported(migrated_database_url: str, jobs: str) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=4)
    assert ledger_json(url, "verify", "--no-translog", "--jobs", jobs)[0] == 0
    victim = stored[1].submission_id
    [[first_seq, entries]] = query(
        url,
        "SELECT min(global_seq), count(*) FROM ledger_store.entries WHERE submission_id = %(s)s",
        {"s": victim},
    )
    tamper(url, "DELETE FROM ledger_store.submissions WHERE submission_id = %(s)s", {"s": victim})

    for flags in (("--no-translog",), ()):
        code, report = ledger_json(url, "verify", *flags, "--jobs", jobs)
        assert code != 0 and not report["ok"], (flags, report["problems"])
        [problem] = problems(report, "submission_missing")
        assert (problem["submission_id"], problem["global_seq"]) == (victim, first_seq)
        assert problem["details"]["entries"] == entries
        assert [p for p in problems(report) if p["code"] != "submission_missing"] == []
