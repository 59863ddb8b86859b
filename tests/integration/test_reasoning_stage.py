"""Issue 7 (ledger part): the reasoning stage verifies exactly the submissions that asked for it,
records every provider exchange, adds nothing on re-runs, bounds its concurrency and replays
from the record without the network. Real Postgres, real SDK clients, local vendor stubs."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from typing import Any

import pytest
from sqlalchemy import text

from engine.reasoning import ReasoningResult
from ledger.reasoning.stage import replay_reasoning_entry
from ledger.store.ledger_store import LedgerStore
from tests.helpers.database import chain_problems
from tests.helpers.reasoning import (
    ABOVE_ON_DATE,
    AT_OR_ABOVE,
    BOOLEAN,
    ROOT,
    TRACE,
    InFlight,
    Stubs,
    by_submission,
    corpus_inputs,
    make_worker,
    reasoning_entries,
    submit,
)
from tests.stubs.llm_servers import StubResponse

pytestmark = pytest.mark.integration


def submit_mix(store: LedgerStore) -> dict[str, str]:
    """Three submissions asking for verification, two not."""
    return {
        "valid": submit(store, AT_OR_ABOVE, event_id="ask-valid", verify=True),
        "invalid": submit(store, ABOVE_ON_DATE, event_id="ask-invalid", verify=True),
        "boolean": submit(store, BOOLEAN, event_id="ask-boolean", verify=True),
        "quiet-1": submit(store, ABOVE_ON_DATE, event_id="quiet-1", verify=False),
        "quiet-2": submit(store, AT_OR_ABOVE, event_id="quiet-2", verify=False),
    }


def test_worker_records_exactly_the_requested_submissions_with_their_exchanges(
    ledger_store: LedgerStore,
    migrated_database_url: str,
) -> None:
    ids = submit_mix(ledger_store)
    with Stubs() as stubs:
        stats = asyncio.run(make_worker(ledger_store, stubs, concurrency=2).run_once())

        recorded = by_submission(ledger_store)
        assert set(recorded) == {ids["valid"], ids["invalid"], ids["boolean"]}
        assert all(len(entries) == 1 for entries in recorded.values())
        assert (stats.found, stats.appended, stats.errors) == (3, 3, 0)
        assert stats.statuses == {"valid": 1, "invalid": 1, "not_applicable": 1}
        assert stubs.request_count() == 4  # two calls each for the two with arithmetic, none for boolean
        assert chain_problems(migrated_database_url) == []

    valid = recorded[ids["valid"]][0].payload
    question = corpus_inputs(AT_OR_ABOVE)["prompt_spec"]["market"]["question"]
    assert valid["status"] == "valid" and valid["attempt"] == 1
    assert valid["task"]["query"] == question
    assert valid["task"]["query_source"] == "prompt_spec.market.question"
    assert valid["task"]["expression"] == "100000.0 - 100000"
    assert valid["task"]["operands"] == {"numeric_value": 100000.0, "threshold": 100000, "comparator": ">="}
    submission = ledger_store.get_submission(ids["valid"])
    assert submission is not None
    audit = next(entry for entry in submission.entries if entry.kind == "audit.completed")
    assert valid["audit_entry_hash"] == audit.entry_hash
    assert submission.entries[-1].kind == "reasoning.verified"
    assert submission.entries[-1].stream_seq == len(submission.entries)

    result = ReasoningResult.model_validate(valid["result"])
    assert result.is_valid and valid["result_hash"] == result.result_hash()
    trace, translation = result.exchanges
    assert (trace.purpose, trace.vendor, trace.model) == ("reasoning_trace", "anthropic", "claude-stub")
    assert (translation.purpose, translation.vendor, translation.model) == (
        "formula_translation",
        "openai",
        "gpt-stub",
    )
    assert trace.response_text == TRACE
    assert translation.response_text is not None and "100000.0 - 100000" in translation.response_text
    for exchange in (trace, translation):
        assert exchange.request_fingerprint.startswith("0x") and len(exchange.request_fingerprint) == 66
        assert exchange.decoding_policy.temperature == 0.0
        assert exchange.endpoint.startswith("http://127.0.0.1:")
    assert "cached" not in valid["result"]

    invalid = recorded[ids["invalid"]][0].payload
    assert invalid["status"] == "invalid"
    assert invalid["task"]["expression"] == "104250.12 - 100000"
    assert any(issue.startswith("Formula missing numbers") for issue in invalid["result"]["issues"])

    boolean = recorded[ids["boolean"]][0].payload
    assert boolean["status"] == "not_applicable" and boolean["reason_code"] == "no_arithmetic"
    assert "result" not in boolean and "expression" not in boolean["task"]


def test_re_running_adds_nothing(ledger_store: LedgerStore) -> None:
    submit_mix(ledger_store)
    with Stubs() as stubs:
        worker = make_worker(ledger_store, stubs)
        asyncio.run(worker.run_once())
        seq_after_first, calls_after_first = ledger_store.max_seq(), stubs.request_count()

        again = asyncio.run(worker.run_once())
        fresh = asyncio.run(make_worker(ledger_store, stubs).run_once())  # no cursor: rescans from 0

        assert (again.found, again.appended, fresh.found, fresh.appended) == (0, 0, 0, 0)
        assert ledger_store.max_seq() == seq_after_first
        assert stubs.request_count() == calls_after_first
        assert len(reasoning_entries(ledger_store)) == 3


def test_a_submission_appended_later_is_picked_up_by_the_next_pass(ledger_store: LedgerStore) -> None:
    first = submit(ledger_store, AT_OR_ABOVE, event_id="early", verify=True)
    with Stubs() as stubs:
        worker = make_worker(ledger_store, stubs)
        asyncio.run(worker.run_once())
        cursor = worker.cursor
        late = submit(ledger_store, AT_OR_ABOVE, event_id="late", verify=True)
        stats = asyncio.run(worker.run_once())

    assert cursor >= 1 and stats.appended == 1
    assert set(by_submission(ledger_store)) == {first, late}


def test_replay_reproduces_every_result_hash_with_the_network_stopped(
    ledger_store: LedgerStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    submit_mix(ledger_store)
    with Stubs() as stubs:
        stubs.anthropic.enqueue(
            *[StubResponse(status=429, headers={"retry-after": "0"})] * 2
        )  # the first verification's trace fails closed
        asyncio.run(make_worker(ledger_store, stubs, concurrency=1).run_once())
    payloads = [entry.payload for entry in reasoning_entries(ledger_store)]
    assert {payload["status"] for payload in payloads} == {"fail_closed", "invalid", "not_applicable"}

    def no_network(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("replay must not open a connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    for payload in payloads:
        assert replay_reasoning_entry(payload) == (True, [])

    verified = next(payload for payload in payloads if payload["status"] == "invalid")
    tampered = json.loads(json.dumps(verified))
    tampered["result"]["exchanges"][0]["response_text"] = "1. A different trace entirely"
    identical, diff = replay_reasoning_entry(tampered)
    assert not identical and any(line.startswith("result_hash") for line in diff)

    moved = {**verified, "task": {**verified["task"], "expression": "104250.12 - 99999"}}
    identical, diff = replay_reasoning_entry(moved)
    assert not identical and any("replay miss" in line for line in diff)


@pytest.mark.parametrize("concurrency", [1, 3])
def test_concurrency_is_bounded(ledger_store: LedgerStore, concurrency: int) -> None:
    for index in range(7):
        submit(ledger_store, AT_OR_ABOVE, event_id=f"load-{index}", verify=True)
    in_flight = InFlight(delay=0.25)
    with Stubs(in_flight) as stubs:
        stats = asyncio.run(make_worker(ledger_store, stubs, concurrency=concurrency, page_size=2).run_once())

    assert stats.appended == 7 and stubs.request_count() == 14
    assert in_flight.peak == concurrency  # never more than N at once, and N is actually used
    assert len(by_submission(ledger_store)) == 7


def test_reason_worker_command_runs_one_pass_as_its_own_process(
    ledger_store: LedgerStore, migrated_database_url: str
) -> None:
    ids = submit_mix(ledger_store)
    with Stubs() as stubs:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_", "ANTHROPIC_", "OPENAI_"))}
        env.update(stubs.env())
        command = [sys.executable, "-m", "cli", "reason-worker", "--once", "--concurrency", "2"]
        done = subprocess.run(
            [*command, "--database-url", migrated_database_url],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "3 found, 3 appended" in done.stdout
        again = subprocess.run(
            [*command, "--database-url", migrated_database_url],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert again.returncode == 0 and "0 found, 0 appended" in again.stdout
    assert set(by_submission(ledger_store)) == {ids["valid"], ids["invalid"], ids["boolean"]}
    stored = "".join(entry.payload_canonical for entry in ledger_store.iter_entries())
    for name, secret in stubs.env().items():
        if name.endswith("_API_KEY"):
            assert secret not in done.stdout + done.stderr and secret not in stored


def test_stored_inputs_the_consumer_would_refuse_are_never_verified(ledger_store: LedgerStore) -> None:
    """The stage reads question and options through the consumer's decoder: a received payload
    rewritten behind the triggers (market-id mismatch) is an error on every pass, never verified."""
    good = submit(ledger_store, AT_OR_ABOVE, event_id="decoder-good", verify=True)
    bad = submit(ledger_store, AT_OR_ABOVE, event_id="decoder-bad", verify=True)
    with ledger_store.engine.begin() as conn:  # as the superuser, past the append-only triggers
        conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
        changed = conn.execute(
            text(
                "UPDATE ledger_store.entries SET payload_canonical = jsonb_set(payload_canonical::jsonb, "
                "'{evidence_bundle,market_id}', '\"mk_elsewhere\"')::text "
                "WHERE submission_id = :s AND kind = 'submission.received'"
            ),
            {"s": bad},
        ).rowcount
    assert changed == 1
    with Stubs() as stubs:
        worker = make_worker(ledger_store, stubs)
        first = asyncio.run(worker.run_once())
        again = asyncio.run(make_worker(ledger_store, stubs).run_once())

    assert (first.found, first.appended, first.errors) == (2, 1, 1)
    assert (again.found, again.appended, again.errors) == (1, 0, 1)
    assert set(by_submission(ledger_store)) == {good}
