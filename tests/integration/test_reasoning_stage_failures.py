"""Issue 7 (ledger part): provider failures are recorded fail-closed, retried only on request as new
attempts, and racing workers never record a submission twice (the store's chain rules decide)."""

from __future__ import annotations

import asyncio
import json

import pytest

from engine.reasoning import ReasoningVerifier, build_providers_from_env
from engine.version import ENGINE_VERSION
from ledger.errors import InvalidDraftError
from ledger.reasoning.stage import replay_reasoning_entry
from ledger.reasoning.work_queue import append_to_stream
from ledger.reasoning.worker import PassStats, ReasoningWorker
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import EntryDraft
from tests.helpers.database import chain_problems
from tests.helpers.reasoning import (
    AT_OR_ABOVE,
    Stubs,
    by_submission,
    make_worker,
    submit,
)
from tests.stubs.llm_servers import StubResponse

pytestmark = pytest.mark.integration

RATE_LIMITED = StubResponse(status=429, headers={"retry-after": "0"})
SERVER_ERROR = StubResponse(status=500)


def test_429_and_500_are_recorded_fail_closed_and_retried_only_with_retry_failed(
    ledger_store: LedgerStore,
    migrated_database_url: str,
) -> None:
    first = submit(ledger_store, AT_OR_ABOVE, event_id="limited", verify=True)
    second = submit(ledger_store, AT_OR_ABOVE, event_id="erroring", verify=True)
    with Stubs() as stubs:
        # concurrency 1, in order: the first submission's trace call meets both 429s (two
        # attempts), its translation succeeds; the second's translation meets both 500s
        stubs.anthropic.enqueue(RATE_LIMITED, RATE_LIMITED)
        stubs.openai.enqueue(json.dumps({"expression": "100000.0 - 100000"}), SERVER_ERROR, SERVER_ERROR)
        worker = make_worker(ledger_store, stubs, concurrency=1)
        stats = asyncio.run(worker.run_once())
        assert stats.statuses == {"fail_closed": 2}
        assert len(stubs.anthropic.requests) == 3 and len(stubs.openai.requests) == 3

        recorded = by_submission(ledger_store)
        limited = recorded[first][0].payload
        trace, _ = limited["result"]["exchanges"]
        assert (trace["error_class"], trace["error_code"]) == ("ProviderRateLimitError", "rate_limited")
        assert "response_text" not in trace
        assert limited["result"]["is_valid"] is False
        erroring = recorded[second][0].payload
        _, translation = erroring["result"]["exchanges"]
        assert (translation["error_class"], translation["error_code"]) == (
            "ProviderServerError",
            "server_error",
        )
        assert "Cross-validation failed: server_error" in erroring["result"]["issues"]

        plain = asyncio.run(make_worker(ledger_store, stubs).run_once())
        assert plain.found == 0  # without --retry-failed a recorded result is final

        retried = asyncio.run(make_worker(ledger_store, stubs, retry_failed=True, retry_backoff=0).run_once())
        assert retried.statuses == {"valid": 2}
        settled = asyncio.run(make_worker(ledger_store, stubs, retry_failed=True, retry_backoff=0).run_once())
        assert settled.found == 0

    recorded = by_submission(ledger_store)
    for submission_id in (first, second):
        attempts = [entry.payload for entry in recorded[submission_id]]
        assert [(p["attempt"], p["status"]) for p in attempts] == [(1, "fail_closed"), (2, "valid")]
    assert chain_problems(migrated_database_url) == []


def test_retries_wait_for_the_backoff_and_stop_at_max_attempts(ledger_store: LedgerStore) -> None:
    submission = submit(ledger_store, AT_OR_ABOVE, event_id="always-failing", verify=True)
    with Stubs() as stubs:
        stubs.openai.reply = lambda request: SERVER_ERROR
        asyncio.run(make_worker(ledger_store, stubs).run_once())

        waiting = asyncio.run(
            make_worker(ledger_store, stubs, retry_failed=True, retry_backoff=3600).run_once()
        )
        assert (waiting.found, waiting.deferred, waiting.appended) == (1, 1, 0)

        worker = make_worker(ledger_store, stubs, retry_failed=True, retry_backoff=0, max_attempts=2)
        second = asyncio.run(worker.run_once())
        third = asyncio.run(worker.run_once())
        assert second.statuses == {"fail_closed": 1}
        assert third.found == 0

    attempts = [entry.payload["attempt"] for entry in by_submission(ledger_store)[submission]]
    assert attempts == [1, 2]


def test_racing_workers_record_each_submission_once(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    ids = [submit(ledger_store, AT_OR_ABOVE, event_id=f"race-{index}", verify=True) for index in range(4)]
    with Stubs() as stubs:
        stubs.in_flight.delay = 0.1  # both workers read the same pending set before either appends
        first, second = make_worker(ledger_store, stubs), make_worker(ledger_store, stubs)

        async def race() -> list[PassStats]:
            return list(await asyncio.gather(first.run_once(), second.run_once()))

        one, two = asyncio.run(race())

    assert one.found == two.found == 4
    assert one.appended + two.appended == 4
    assert one.duplicates + two.duplicates == 4
    recorded = by_submission(ledger_store)
    assert set(recorded) == set(ids) and all(len(entries) == 1 for entries in recorded.values())
    assert chain_problems(migrated_database_url) == []


def _entry(text: str) -> EntryDraft:
    return EntryDraft("reasoning.verified", {"status": "valid", "note": text})


def test_append_to_stream_is_compare_and_append_on_the_chain_head(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    submission_id = submit(ledger_store, AT_OR_ABOVE, event_id="cas", verify=True)
    record = ledger_store.get_submission(submission_id)
    assert record is not None
    head = record.entries[-1].stream_seq

    created = append_to_stream(
        ledger_store, submission_id, [_entry("a")], expected_stream_seq=head, engine_version=ENGINE_VERSION
    )
    again = append_to_stream(
        ledger_store, submission_id, [_entry("a")], expected_stream_seq=head, engine_version=ENGINE_VERSION
    )
    other = append_to_stream(
        ledger_store, submission_id, [_entry("b")], expected_stream_seq=head, engine_version=ENGINE_VERSION
    )

    assert created.status == "created" and created.entries[0].stream_seq == head + 1
    assert created.entries[0].prev_hash == record.entries[-1].entry_hash
    assert again.status == "existing" and again.entries == created.entries
    assert other.status == "stale" and other.entries == created.entries
    assert len(by_submission(ledger_store)[submission_id]) == 1
    with pytest.raises(InvalidDraftError):
        append_to_stream(
            ledger_store,
            submission_id,
            [_entry("c")],
            expected_stream_seq=head + 5,
            engine_version=ENGINE_VERSION,
        )
    with pytest.raises(InvalidDraftError):
        append_to_stream(
            ledger_store,
            submission_id,
            [EntryDraft("audit.completed", {})],
            expected_stream_seq=head + 1,
            engine_version=ENGINE_VERSION,
        )
    assert chain_problems(migrated_database_url) == []


def test_missing_api_key_is_recorded_fail_closed_and_replays_from_the_store(
    ledger_store: LedgerStore,
) -> None:
    submission = submit(ledger_store, AT_OR_ABOVE, event_id="no-openai-key", verify=True)
    with Stubs() as stubs:
        environ = {name: value for name, value in stubs.env().items() if name != "OPENAI_API_KEY"}
        verifier = ReasoningVerifier(build_providers_from_env(["anthropic", "openai"], environ=environ))
        stats = asyncio.run(ReasoningWorker(ledger_store, verifier).run_once())
        assert stubs.openai.requests == []

    payload = by_submission(ledger_store)[submission][0].payload
    assert stats.statuses == {"fail_closed": 1}
    assert payload["result"]["providers"][1]["available"] is False
    assert (
        "Cross-validation requested but no distinct secondary provider is available"
        in payload["result"]["issues"]
    )
    assert replay_reasoning_entry(payload) == (True, [])
