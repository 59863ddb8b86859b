"""The reasoning stage's pure rules: the expression rule, statuses, payloads and replay (in-process
providers, no network, no database)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.reasoning import (
    Provider,
    ProviderRateLimitError,
    ReasoningResult,
    ReasoningTask,
    ReasoningVerifier,
    UnavailableProvider,
    evaluate_formula,
)
from ledger.reasoning.stage import (
    derive_request,
    format_operand,
    not_applicable_entry,
    replay_reasoning_entry,
    result_entry,
    status_of,
)
from tests.stubs.providers import ScriptedProvider

QUESTION = "Will BTC close at or above $100,000?"


@pytest.mark.parametrize(
    ("value", "threshold", "expression"),
    [
        (104250.12, 100000, "104250.12 - 100000"),
        (100000.0, 100000, "100000.0 - 100000"),  # an int stays an int, a float keeps its ".0"
        (1.234e-05, 1e-05, "1.234e-05 - 1e-05"),  # Python repr, as in canonical JSON
        (3412345678901.23, 3000000000000, "3412345678901.23 - 3000000000000"),
        (5, -3, "5 - (-3)"),
        (-2.5, 4, "-2.5 - 4"),
    ],
)
def test_expression_is_numeric_value_minus_threshold_formatted_exactly(
    value: float, threshold: float, expression: str
) -> None:
    request = derive_request(
        QUESTION, {"verify_reasoning": True}, {"numeric_value": value, "threshold": threshold}
    )

    assert request.applicable and request.expression == expression
    assert request.operands == {"numeric_value": value, "threshold": threshold, "comparator": None}
    assert evaluate_formula(expression) is not None  # the verifier's evaluator accepts it


def test_query_defaults_to_the_market_question_and_options_override_both() -> None:
    variables = {"numeric_value": 3, "threshold": 2, "comparator": ">"}
    default = derive_request(QUESTION, {"verify_reasoning": True}, variables)
    chosen = derive_request(
        QUESTION,
        {"verify_reasoning": True, "reasoning_query": "What is 3 minus 2?", "reasoning_expression": "3 - 2"},
        None,
    )

    assert (default.query, default.query_source) == (QUESTION, "prompt_spec.market.question")
    assert default.operands == {"numeric_value": 3, "threshold": 2, "comparator": ">"}
    assert (chosen.query, chosen.expression) == ("What is 3 minus 2?", "3 - 2")
    assert chosen.expression_source == "envelope_options.reasoning_expression"


@pytest.mark.parametrize(
    "variables",
    [
        None,
        {"event_observed": True},
        {"numeric_value": 1.0},
        {"numeric_value": True, "threshold": 1},  # a bool is not a number
        {"numeric_value": "104250.12", "threshold": 100000},
    ],
)
def test_without_two_numbers_there_is_no_arithmetic_to_verify(variables: dict[str, object] | None) -> None:
    request = derive_request(QUESTION, {"verify_reasoning": True}, variables)

    assert not request.applicable and request.reason_code == "no_arithmetic"
    payload = not_applicable_entry(request, attempt=1, audit_entry_hash=None).payload
    assert payload["status"] == "not_applicable" and "result" not in payload


def _verify(*providers: Provider, cross: bool = True) -> ReasoningResult:
    verifier = ReasoningVerifier(list(providers), enable_cache=False)
    return verifier.verify_reasoning(
        "What is 10 plus 5?", ReasoningTask(expression="10 + 5"), enable_cross_validation=cross
    )


def test_status_separates_a_wrong_answer_from_missing_evidence() -> None:
    primary = ScriptedProvider("anthropic", "a", "https://a.example", formula="10 + 5")
    agreeing = ScriptedProvider("openai", "b", "https://b.example", formula="10 + 5")
    disagreeing = ScriptedProvider("openai", "b", "https://b.example", formula="10 - 5")
    limited = ScriptedProvider("openai", "b", "https://b.example", failures=[ProviderRateLimitError("429")])

    assert status_of(_verify(primary, agreeing)) == "valid"
    assert status_of(_verify(primary, disagreeing)) == "invalid"
    assert status_of(_verify(primary, limited)) == "fail_closed"
    assert status_of(_verify(primary)) == "fail_closed"  # cross-validation without a secondary
    assert status_of(_verify(UnavailableProvider("anthropic", "no key"), cross=False)) == "fail_closed"


@pytest.mark.parametrize("placeholder", ["1. Rate limit exceeded", "1. N/A", "no list"])
def test_a_placeholder_answer_returned_by_the_primary_is_fail_closed_not_invalid(placeholder: str) -> None:
    primary = ScriptedProvider("anthropic", "a", "https://a.example", trace=placeholder)
    agreeing = ScriptedProvider("openai", "b", "https://b.example", formula="10 + 5")
    result = _verify(primary, agreeing)
    assert not any(exchange.failed for exchange in result.exchanges)
    assert status_of(result) == "fail_closed"  # retryable: the provider may answer later


def test_a_refused_formula_is_invalid_not_fail_closed() -> None:
    primary = ScriptedProvider("anthropic", "a", "https://a.example")
    echo = ScriptedProvider("openai", "b", "https://b.example", formula="(lambda: 10 + 5)()")
    verifier = ReasoningVerifier([primary, echo], enable_cache=False)
    result = verifier.verify_reasoning("What is 10 plus 5?", ReasoningTask(expression="(lambda: 10 + 5)()"))
    assert status_of(result) == "invalid"


def _payload(*providers: Provider) -> dict[str, Any]:
    request = derive_request("What is 10 plus 5?", {"reasoning_expression": "10 + 5"}, None)
    verifier = ReasoningVerifier(list(providers), enable_cache=False)
    result = verifier.verify_reasoning(request.query or "", request.task())
    return result_entry(request, result, attempt=1, audit_entry_hash="0x" + "1" * 64).payload


def test_replay_from_the_record_reproduces_the_result_hash_without_calling_anyone() -> None:
    primary = ScriptedProvider("anthropic", "a", "https://a.example")
    secondary = ScriptedProvider("openai", "b", "https://b.example", failures=[ProviderRateLimitError("429")])
    third = UnavailableProvider("gemini", "no key")  # configured but unavailable: still part of the result
    payload = _payload(primary, secondary, third)
    calls = len(primary.requests) + len(secondary.requests)

    assert payload["status"] == "fail_closed"
    assert replay_reasoning_entry(payload) == (True, [])
    assert len(primary.requests) + len(secondary.requests) == calls


def test_replay_reports_a_forged_result_hash_and_version_drift() -> None:
    payload = _payload(ScriptedProvider("anthropic", "a", "https://a.example"), ScriptedProvider("openai"))
    forged = {**payload, "result_hash": "0x" + "0" * 64}
    drifted = {**payload, "result": {**payload["result"], "verifier_version": "reasoning-verifier/0.9"}}

    identical, diff = replay_reasoning_entry(forged)
    assert not identical and diff[0].startswith("result_hash: payload says 0x000")
    identical, diff = replay_reasoning_entry(drifted)
    assert not identical and any(line.startswith("version drift") for line in diff)


def test_live_replay_reports_divergence_field_by_field() -> None:
    payload = _payload(ScriptedProvider("anthropic", "a", "https://a.example"), ScriptedProvider("openai"))
    live = [
        ScriptedProvider("anthropic", "a", "https://a.example", trace="1. Add ten and five to get 15"),
        ScriptedProvider("openai"),
    ]

    identical, diff = replay_reasoning_entry(payload, providers=live)
    assert not identical
    assert any(line.startswith("result.reasoning_trace") for line in diff)
    assert any(line.startswith("result.exchanges") for line in diff)


@pytest.mark.parametrize(
    "broken",
    [
        {"status": "valid"},
        {"status": "valid", "task": {"query": "q", "expression": "1"}, "result": {"is_valid": "yes"}},
        {"status": "not_applicable", "result": {}},
    ],
)
def test_malformed_payloads_are_differences_not_exceptions(broken: dict[str, object]) -> None:
    identical, diff = replay_reasoning_entry(broken)
    assert not identical and diff


def test_format_operand_is_canonical_json() -> None:
    assert [format_operand(v) for v in (100000, 100000.0, 1e-05, 1e21)] == [
        "100000",
        "100000.0",
        "1e-05",
        "1e+21",
    ]


def test_stored_results_with_an_unset_temperature_round_trip() -> None:
    """Canonical JSON drops ``temperature: None``; the engine model must read it back as None."""
    result = _verify(
        ScriptedProvider("anthropic", "a", "https://a.example"), UnavailableProvider("openai", "no key")
    )
    stored = json.loads(result.canonical_json(include_cached=False))

    assert ReasoningResult.model_validate(stored).result_hash() == result.result_hash()
