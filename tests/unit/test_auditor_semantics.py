"""Threshold and comparator semantics that Cournot gets wrong, and the regex cost guard."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.auditor.reasoning.regex_guard import regex_risk
from engine.auditor.reasoning.semantics import compare, derive_event_spec, find_comparators, parse_quantity
from engine.schemas import PromptSpec
from tests.golden.regenerate import CORPUS_DIR


@pytest.mark.parametrize(
    ("text", "value", "unit"),
    [
        ("100000", 100000, None),
        ("100,000", 100000, None),
        ("$100k", 100000, "usd"),
        ("$100K", 100000, "usd"),
        ("1.5M", 1500000, None),
        ("2 billion", 2000000000, None),
        ("$3T", 3000000000000, "usd"),
        ("5%", 5, "percent"),
        ("3.2%", 3.2, "percent"),
        ("-2.5 percent", -2.5, "percent"),
        ("100000 USD", 100000, "usd"),
        ("$100,000 USD", 100000, "usd"),
        ("100,000.50", 100000.5, None),
        ("$0.00001", 1e-05, "usd"),
        ("1e6", 1000000, None),
        ("¥40,000", 40000, "jpy"),
        ("  4000  ", 4000, None),
        ("100 BTC", 100, "btc"),
    ],
)
def test_threshold_forms_parse_exactly(text: str, value: float, unit: str | None) -> None:
    quantity = parse_quantity(text)
    assert quantity is not None
    assert quantity.value == value and type(quantity.value) is type(value)
    assert quantity.unit == unit


@pytest.mark.parametrize(
    "text",
    [
        "one hundred thousand",
        "1,5",
        "100.000,5",
        "100kusd",
        "100 mph",
        "$5%",
        "100 EUR USD",
        "",
        "$",
        "1e-400",
        "~100k",
    ],
)
def test_unparseable_thresholds_are_refused_not_guessed(text: str) -> None:
    assert parse_quantity(text) is None


@pytest.mark.parametrize(
    ("text", "comparators"),
    [
        ("price_above", [">"]),
        ("greater than", [">"]),
        ("exceeds", [">"]),
        ("at least", [">="]),
        ("greater than or equal to", [">="]),
        (">=", [">="]),
        ("≥", [">="]),
        ("closes at or above", [">="]),
        ("100k or more", [">="]),
        ("at most", ["<="]),
        ("no more than", ["<="]),
        ("does not exceed", ["<="]),
        ("doesn't exceed", ["<="]),
        ("not below", [">="]),
        ("below", ["<"]),
        ("less than", ["<"]),
        ("equals", ["=="]),
        ("price == threshold", ["=="]),
        ("overall understanding of the market", []),  # no substring matches ("over", "under")
        ("see https://x.test/?a=b&c=d", []),  # '=' inside URLs is not a comparator
    ],
)
def test_comparators_are_matched_as_words_and_symbols(text: str, comparators: list[str]) -> None:
    assert [match.comparator for match in find_comparators(text)] == comparators


@pytest.mark.parametrize(
    ("value", "comparator", "threshold", "expected"),
    [
        (100000, ">", 100000, False),
        (100000, ">=", 100000, True),
        (100000.0, "<=", 100000, True),
        (99999.99, "<", 100000, True),
        (3.2, "==", 3.2, True),
        (1, "==", 1.0, True),
        (10**400, ">", 1.7976931348623157e308, True),
    ],
)
def test_compare_is_exact(value: float, comparator: str, threshold: float, expected: bool) -> None:
    assert compare(value, comparator, threshold) is expected


def spec_with(
    predicate: str, threshold: str | None, definition: str = "The value is observed."
) -> PromptSpec:
    document: dict[str, Any] = json.loads(
        (CORPUS_DIR / "01_clean_threshold.json").read_text(encoding="utf-8")
    )
    document["prompt_spec"]["prediction_semantics"]["predicate"] = predicate
    document["prompt_spec"]["prediction_semantics"]["threshold"] = threshold
    document["prompt_spec"]["market"]["event_definition"] = definition
    return PromptSpec.model_validate(document["prompt_spec"])


def test_predicate_wins_over_event_definition_and_the_disagreement_is_reported() -> None:
    event = derive_event_spec(spec_with("price_above", "100000", "BTC is at least 100000 USD"))
    assert (event.comparator, event.comparator_source, event.computable) == (">", "predicate", True)
    assert event.warnings and "at least" in event.warnings[0]


def test_event_definition_is_used_when_the_predicate_states_no_comparison() -> None:
    event = derive_event_spec(spec_with("closing price", "100000", "BTC closes at or above 100000 USD"))
    assert (event.comparator, event.comparator_source) == (">=", "event_definition")


@pytest.mark.parametrize(
    ("predicate", "threshold", "definition", "code"),
    [
        ("price_above", "one hundred thousand", "x", "threshold_unparseable"),
        ("breaks range", "110000", "above 110000 or below 90000", "comparator_unparseable"),
        ("moves", "110000", "BTC moves a lot", "comparator_missing"),
        ("between", "110000", "x", "comparator_unparseable"),
        ("price_above", None, "x", "threshold_missing"),
        ("not equal", "5", "x", "comparator_unparseable"),
    ],
)
def test_unusable_event_definitions_make_evidence_insufficient(
    predicate: str, threshold: str | None, definition: str, code: str
) -> None:
    event = derive_event_spec(spec_with(predicate, threshold, definition))
    assert not event.computable
    assert code in [problem_code for problem_code, _ in event.problems]


def test_boolean_text_and_multi_choice_events() -> None:
    assert derive_event_spec(spec_with("is approved", None)).kind == "boolean"
    text_event = derive_event_spec(spec_with("equals", "Kansas City Chiefs"))
    assert (text_event.kind, text_event.needed_kind, text_event.computable) == (
        "text_equals",
        "text_assertion",
        True,
    )
    document = json.loads((CORPUS_DIR / "29_multi_choice.json").read_text(encoding="utf-8"))
    event = derive_event_spec(PromptSpec.model_validate(document["prompt_spec"]))
    assert event.kind == "multi_choice" and "Philadelphia Eagles" in event.outcomes


@pytest.mark.parametrize(
    "pattern", [r"(a+)+", r"(a|aa)*", r"(\s*)+$", r"\d+\d+x", r".*\s*x", r"a{2,}a{3,}", r"(?:\d|,)+"]
)
def test_catastrophic_backtracking_shapes_are_refused(pattern: str) -> None:
    assert regex_risk(pattern) is not None


@pytest.mark.parametrize(
    "pattern",
    [
        r"Price:\s*\$?([0-9,.]+)",
        r'data-testid="price">\$(?P<value>[0-9][0-9,]*(?:\.[0-9]+)?)<',
        r"[0-9,]+(?:\.[0-9]+)?\s*USD",
        r"Passed:\s*(?P<value>Yes|No)\b",
        r"<time datetime=\"(?P<value>[0-9TZ:.+-]{10,40})\"",
        r"(?i)approved",
        r"(\d+)\s*(?=USD)",
    ],
)
def test_ordinary_extraction_patterns_are_accepted(pattern: str) -> None:
    assert regex_risk(pattern) is None
