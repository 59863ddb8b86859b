"""A producer's reasoning task travels through Kafka: a v2 envelope with ``reasoning_query`` and
``reasoning_expression`` is published to the embedded broker, consumed into the ledger by
``ledger consume``, and ``ledger reason-worker`` (real SDK clients, local vendor stubs) verifies
exactly that query and expression. A v1 envelope next to it keeps the market question."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.envelope import wrap_inputs
from engine.reasoning import ReasoningResult
from ledger.reasoning.stage import replay_reasoning_entry
from ledger.store.ledger_store import LedgerStore
from tests.helpers.consumer import consumer_env, make_inputs, publish, run_consumer
from tests.helpers.reasoning import FORMULAS, ROOT, Stubs, by_submission

pytestmark = pytest.mark.integration

PRODUCER_QUERY = "What is 104250.12 minus 100000?"
PRODUCER_EXPRESSION = "104250.12 - 100000"


def run_reason_worker(stubs: Stubs, database_url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_", "ANTHROPIC_", "OPENAI_"))}
    env.update(stubs.env())
    return subprocess.run(
        [sys.executable, "-m", "cli", "reason-worker", "--once", "--database-url", database_url],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def prompts_sent(stubs: Stubs) -> list[str]:
    """The user prompt of every request the stubs received (JSON text holding the query)."""
    texts = []
    for server in stubs.servers.values():
        for request in server.requests:
            body = request.json if isinstance(request.json, dict) else {}
            texts.append(str(body.get("messages", [{}])[-1].get("content", "")))
    return texts


def test_reasoning_options_published_in_a_v2_envelope_drive_the_reasoning_stage(
    kafka_bootstrap: str,
    migrated_database_url: str,
    ledger_store: LedgerStore,
    topic_name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(FORMULAS, PRODUCER_QUERY, PRODUCER_EXPRESSION)  # what the secondary stub answers
    asked, plain = make_inputs(1), make_inputs(2)
    v2 = wrap_inputs(
        asked["prompt_spec"],
        asked["evidence_bundle"],
        event_id="producer-task",
        verify_reasoning=True,
        reasoning_query=PRODUCER_QUERY,
        reasoning_expression=PRODUCER_EXPRESSION,
    )
    v1 = wrap_inputs(
        plain["prompt_spec"], plain["evidence_bundle"], event_id="market-question", verify_reasoning=True
    )
    assert (v2["schema_version"], v1["schema_version"]) == (2, 1)
    publish(kafka_bootstrap, topic_name, [v2, v1])

    run_consumer(tmp_path, consumer_env(kafka_bootstrap, migrated_database_url, topic_name))

    submissions = {
        entry.payload["envelope"]["event_id"]: entry
        for entry in ledger_store.iter_entries()
        if entry.kind == "submission.received"
    }
    assert set(submissions) == {"producer-task", "market-question"}
    received = submissions["producer-task"].payload
    assert received["envelope"]["schema_version"] == 2
    assert received["envelope_options"] == {
        "verify_reasoning": True,
        "reasoning_query": PRODUCER_QUERY,
        "reasoning_expression": PRODUCER_EXPRESSION,
    }
    assert submissions["market-question"].payload["envelope_options"] == {"verify_reasoning": True}

    with Stubs() as stubs:
        done = run_reason_worker(stubs, migrated_database_url)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "2 found, 2 appended" in done.stdout
        sent = prompts_sent(stubs)

    recorded = by_submission(ledger_store)
    payload = recorded[submissions["producer-task"].submission_id][0].payload
    assert payload["task"]["query"] == PRODUCER_QUERY
    assert payload["task"]["query_source"] == "envelope_options.reasoning_query"
    assert payload["task"]["expression"] == PRODUCER_EXPRESSION
    assert payload["task"]["expression_source"] == "envelope_options.reasoning_expression"
    result = ReasoningResult.model_validate(payload["result"])
    assert result.primary_formula == PRODUCER_EXPRESSION
    assert result.alternative_formula == PRODUCER_EXPRESSION and result.provider_agreement is True
    assert payload["status"] == "valid", result.issues
    assert sum(PRODUCER_QUERY in text for text in sent) == 2  # the trace and the translation asked it
    assert replay_reasoning_entry(payload).identical

    question = make_inputs(2)["prompt_spec"]["market"]["question"]
    other = recorded[submissions["market-question"].submission_id][0].payload
    assert other["task"]["query"] == question
    assert other["task"]["query_source"] == "prompt_spec.market.question"
    assert other["task"]["expression_source"] == "evaluation_variables"
