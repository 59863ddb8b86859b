"""Issue 6: ``reasoning.verified`` entries replay from their recorded LLM exchanges (no network)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.reasoning import ReasoningVerifier, build_providers_from_env
from engine.version import ENGINE_VERSION
from ledger.connect import create_ledger_engine
from ledger.reasoning.stage import derive_request, result_entry
from ledger.replay import reasoning as replay_reasoning
from ledger.replay.runner import run_replay
from ledger.replay.source import ReplaySelection
from ledger.store.ledger_store import LedgerStore
from tests.helpers.database import query, tamper
from tests.helpers.replay import build_ledger, ledger_json
from tests.stubs.llm_servers import LLMStubServer, RecordedRequest, is_formula_request
from tests.stubs.providers import ScriptedProvider

pytestmark = pytest.mark.integration

TRACE = (
    "1. Take the observed BTC price of 104250.12 USD\n2. Subtract the threshold: 104250.12 - 100000 = 4250.12"
)


def record_reasoning(url: str, submission_id: str, providers: list[Any] | None = None) -> None:
    """Verify the submission's arithmetic (scripted providers by default) and append the entry, as the stage does."""
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
    providers = providers or [
        ScriptedProvider("anthropic", trace=TRACE, formula=request.expression or ""),
        ScriptedProvider(
            "openai", "model-b", "https://b.example", trace=TRACE, formula=request.expression or ""
        ),
    ]
    verifier = ReasoningVerifier(providers, enable_cache=False)
    result = verifier.verify_reasoning(request.query or "", request.task())
    assert result.exchanges, "the verifier recorded no exchange"
    entry = result_entry(request, result, attempt=1, audit_entry_hash=audit_hash)
    with LedgerStore(url) as store:
        appended = store.append_to_stream(
            submission_id,
            [entry],
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


class _Vendor:
    """An LLM stub server whose trace answer can change between runs."""

    def __init__(self, vendor: str, key: str, formula: str) -> None:
        self.trace, self.formula = TRACE, formula
        self.server = LLMStubServer(vendor, reply=self.reply, api_key=key)

    def reply(self, request: RecordedRequest) -> str:
        return json.dumps({"expression": self.formula}) if is_formula_request(request) else self.trace


def test_live_asks_the_providers_again_while_the_default_replays_only_the_records(
    migrated_database_url: str,
) -> None:
    url = migrated_database_url
    [stored] = build_ledger(url, limit=1)
    formula = "104250.12 - 100000"
    vendors = {
        "anthropic": _Vendor("anthropic", "sk-test-replay-anthropic", formula),
        "openai": _Vendor("openai", "sk-test-replay-openai", formula),
    }
    for vendor in vendors.values():
        vendor.server.start()
    try:
        env = {
            "ANTHROPIC_API_KEY": "sk-test-replay-anthropic",
            "ANTHROPIC_BASE_URL": vendors["anthropic"].server.base_url,
            "ANTHROPIC_MODEL": "claude-stub",
            "OPENAI_API_KEY": "sk-test-replay-openai",
            "OPENAI_BASE_URL": vendors["openai"].server.base_url,
            "OPENAI_MODEL": "gpt-stub",
        }
        providers = build_providers_from_env(["anthropic", "openai"], environ=env, timeout=10.0)
        record_reasoning(url, stored.submission_id, providers)
        asked = sum(len(v.server.requests) for v in vendors.values())
        assert asked > 0

        recorded_code, recorded = ledger_json(url, "replay", "--all", env=env)
        assert recorded_code == 0 and recorded["summary"]["reasoning"]["identical"] == 1
        assert sum(len(v.server.requests) for v in vendors.values()) == asked  # answered from the records

        live_code, live = ledger_json(url, "replay", "--all", "--live", env=env)
        assert live_code == 0 and live["summary"]["reasoning"]["identical"] == 1, live
        assert sum(len(v.server.requests) for v in vendors.values()) > asked  # asked again

        vendors["anthropic"].trace = "1. The providers now reason differently about 104250.12 - 100000"
        changed_code, changed = ledger_json(url, "replay", "--all", "--live", env=env)
        assert changed_code == 1 and changed["summary"]["reasoning"]["diverged"] == 1
        [result] = changed["results"]
        assert result["reasoning"][0]["note"] == "live providers answered differently"
        still_code, still = ledger_json(url, "replay", "--all", env=env)
        assert still_code == 0 and still["summary"]["reasoning"]["identical"] == 1
    finally:
        for vendor in vendors.values():
            vendor.server.stop()


def test_without_the_reasoning_stage_its_entries_are_skipped_with_a_note(
    migrated_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = migrated_database_url
    [stored] = build_ledger(url, limit=1)
    record_reasoning(url, stored.submission_id)
    monkeypatch.setattr(replay_reasoning, "reasoning_stage", lambda: None)
    engine = create_ledger_engine(url)
    try:
        report = run_replay(engine, ReplaySelection())
    finally:
        engine.dispose()

    assert report.ok and report.counts["identical"] == 1
    assert report.reasoning_counts["skipped"] == 1
    assert any("1 reasoning.verified entries skipped" in note for note in report.notes)
