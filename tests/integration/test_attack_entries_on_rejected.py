"""Entries chained onto a rejected submission: the store refuses them, and ``ledger verify``
reports one that got there anyway (superuser), even when it hashes, chains and is in the log.

Before, verify checked rejected submissions against a deny-list (no received, step or audit
entry), so a follow-up chained onto one verified as ``ok``: the SQL views would show a
rejected submission with a reasoning result."""

from __future__ import annotations

import pytest

from ledger.errors import InvalidDraftError
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import EntryDraft
from tests.helpers.database import row_counts, tamper
from tests.helpers.ledger_factories import rejected
from tests.helpers.replay import build_ledger, ledger_json, problems

pytestmark = pytest.mark.integration

VERIFIED = EntryDraft("reasoning.verified", {"status": "verified", "attempt": 1, "score": 0.5})


def test_the_store_chains_no_follow_up_onto_a_rejected_submission(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    refused = ledger_store.append(rejected("bad", b"{not json"))
    before = row_counts(migrated_database_url)
    with pytest.raises(InvalidDraftError, match="only an audited submission takes follow-up entries"):
        ledger_store.append_to_stream(
            refused.submission_id, [VERIFIED], expected_stream_seq=1, engine_version="1.0.0"
        )
    assert row_counts(migrated_database_url) == before


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_verify_reports_a_follow_up_on_a_rejected_submission(migrated_database_url: str, jobs: str) -> None:
    url = migrated_database_url
    build_ledger(url, limit=2)
    with LedgerStore(url) as store:
        refused = store.append(rejected("bad", b"{not json"))
        victim = refused.submission_id
        assert ledger_json(url, "verify", "--jobs", jobs)[0] == 0
        status = "UPDATE ledger_store.submissions SET status = %(s)s WHERE submission_id = %(id)s"
        # The superuser lets the store take the follow-up (status briefly 'audited'), then puts the
        # committed status back: the submission id, the chain and the log all still agree.
        tamper(url, status, {"s": "audited", "id": victim})
        added = store.append_to_stream(victim, [VERIFIED], expected_stream_seq=1, engine_version="1.0.0")
        tamper(url, status, {"s": "rejected", "id": victim})
    assert added.status == "created"

    for flags in (("--no-translog",), ()):
        code, report = ledger_json(url, "verify", *flags, "--jobs", jobs)
        assert code != 0 and not report["ok"], (flags, report["problems"])
        [problem] = problems(report, "unexpected_entry")
        assert problem["submission_id"] == victim
        assert "reasoning.verified" in problem["message"]
        assert [p for p in problems(report) if p["code"] != "unexpected_entry"] == []
