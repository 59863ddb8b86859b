"""Issue 6: ``reasoning.verified`` entries replay from their recorded LLM exchanges (no network)."""

from __future__ import annotations

import pytest
from test_replay_support import build_ledger, ledger_json, query, tamper

from engine.reasoning import ReasoningVerifier
from engine.version import ENGINE_VERSION
from ledger.reasoning_stage import derive_request, result_payload
from ledger.records import EntryDraft
from ledger.store import LedgerStore
from tests.stubs.providers import ScriptedProvider

pytestmark = pytest.mark.integration

TRACE = (
    "1. Take the observed BTC price of 104250.12 USD\n2. Subtract the threshold: 104250.12 - 100000 = 4250.12"
)


def record_reasoning(url: str, submission_id: str) -> None:
    """Verify the submission's arithmetic with scripted providers and append the entry, as the stage does."""
    payloads = dict(
        query(
            url,
            "SELECT kind, payload FROM ledger.entries WHERE submission_id = %(s)s "
            "AND kind IN ('submission.received', 'audit.completed')",
            {"s": submission_id},
        )
    )
    [(audit_hash, head)] = query(
        url,
        "SELECT (SELECT entry_hash FROM ledger_store.entries WHERE submission_id = %(s)s AND kind = 'audit.completed'), "
        "max(stream_seq) FROM ledger_store.entries WHERE submission_id = %(s)s",
        {"s": submission_id},
    )
    received, audit = payloads["submission.received"], payloads["audit.completed"]
    request = derive_request(
        received["prompt_spec"]["market"]["question"],
        received.get("envelope_options"),
        audit["evaluation_variables"],
    )
    assert request.applicable, request
    providers = [
        ScriptedProvider("anthropic", trace=TRACE, formula=request.expression or ""),
        ScriptedProvider(
            "openai", "model-b", "https://b.example", trace=TRACE, formula=request.expression or ""
        ),
    ]
    verifier = ReasoningVerifier(providers, enable_cache=False)
    result = verifier.verify_reasoning(request.query or "", request.task())
    assert result.exchanges, "the verifier recorded no exchange"
    payload = result_payload(request, result, attempt=1, audit_entry_hash=audit_hash)
    with LedgerStore(url) as store:
        appended = store.append_to_stream(
            submission_id,
            [EntryDraft("reasoning.verified", payload)],
            expected_stream_seq=head,
            engine_version=ENGINE_VERSION,
        )
    assert appended.status == "created"


def test_recorded_exchanges_replay_to_the_recorded_result_and_a_changed_answer_diverges(
    migrated_database_url: str,
) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=2)  # 01_clean_threshold: 104250.12 against 100000
    record_reasoning(url, stored[0].submission_id)

    code, report = ledger_json(url, "replay", "--all")

    assert code == 0, report
    assert report["summary"]["reasoning"]["identical"] == 1
    assert report["summary"]["identical"] == 2
    assert not any("reasoning" in note for note in report["notes"])

    tamper(
        url,
        "UPDATE ledger_store.entries SET payload_canonical = replace(payload_canonical, '4250.12', '4250.13') "
        "WHERE kind = 'reasoning.verified'",
    )
    code, report = ledger_json(url, "replay", "--all")

    assert code == 1
    assert report["summary"]["reasoning"]["diverged"] == 1
    [result] = report["results"]
    assert result["submission_id"] == stored[0].submission_id
    assert result["status"] == "identical"  # the audit itself still replays byte for byte
    [reasoning] = result["reasoning"]
    assert reasoning["status"] == "diverged"
    assert any(line.startswith("result_hash: ") for line in reasoning["diff"])


def test_without_reasoning_entries_the_report_says_llm_exchanges_were_not_replayed(
    migrated_database_url: str,
) -> None:
    url = migrated_database_url
    build_ledger(url, limit=1)

    code, report = ledger_json(url, "replay", "--all")

    assert code == 0
    assert report["summary"]["reasoning"] == dict.fromkeys(report["summary"]["reasoning"], 0)
    assert any("no reasoning.verified entries" in note for note in report["notes"])
