"""A ledger every legitimate writer has touched verifies clean under the per-status allow-list of
entry kinds (``ledger.verify.kinds``): audited submissions with ``reasoning.verified`` entries
(valid, invalid, not applicable) and ``replay.verified`` entries from two ``replay --record`` runs
interleaved with them, beside a rejected submission that takes none.

Written to look for a false positive of the allow-list (an ``unexpected_entry`` or
``entries_out_of_order`` on a chain the system wrote itself); none was found."""

from __future__ import annotations

import asyncio

import pytest

from ledger.store.ledger_store import LedgerStore
from tests.helpers.ledger_factories import rejected
from tests.helpers.reasoning import ABOVE_ON_DATE, AT_OR_ABOVE, BOOLEAN, Stubs, make_worker, submit
from tests.helpers.replay import ledger_json

pytestmark = pytest.mark.integration


def _kinds(store: LedgerStore, submission_id: str) -> list[str]:
    submission = store.get_submission(submission_id)
    assert submission is not None
    return [entry.kind for entry in submission.entries]


def test_follow_ups_from_every_writer_verify_clean(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    url = migrated_database_url
    ids = [
        submit(ledger_store, AT_OR_ABOVE, event_id="legit-valid", verify=True),
        submit(ledger_store, ABOVE_ON_DATE, event_id="legit-invalid", verify=True),
        submit(ledger_store, BOOLEAN, event_id="legit-boolean", verify=True),
        submit(ledger_store, AT_OR_ABOVE, event_id="legit-quiet", verify=False),
    ]
    refused = ledger_store.append(rejected("legit-bad", b"{not json")).submission_id

    code, report = ledger_json(url, "replay", "--all", "--record")
    assert code == 0, report
    with Stubs() as stubs:
        stats = asyncio.run(make_worker(ledger_store, stubs, concurrency=2).run_once())
    assert stats.errors == 0 and stats.appended == 3
    code, report = ledger_json(url, "replay", "--all", "--record")
    assert code == 0, report

    assert _kinds(ledger_store, ids[0])[-3:] == ["replay.verified", "reasoning.verified", "replay.verified"]
    assert _kinds(ledger_store, refused) == ["submission.rejected"]
    for flags in (("--no-translog",), ()):
        code, verified = ledger_json(url, "verify", *flags)
        assert code == 0 and verified["ok"], verified["problems"]
