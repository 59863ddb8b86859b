"""Chain-of-thought validation and semantic fact extraction, as the seed describes them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.reasoning.facts import check_formula_semantics, expected_operations, extract_semantic_facts
from engine.reasoning.trace import (
    ISSUE_NO_STEPS,
    ISSUE_TRACE_MISSING,
    ISSUE_TRACE_NON_SUBSTANTIVE,
    NON_SUBSTANTIVE_MARKERS,
    check_chain_of_thought,
    is_substantive,
    parse_chain_of_thought,
    parse_entries,
    trace_issues,
)

ROOT = Path(__file__).resolve().parents[2]

# --- reasoning trace entries --------------------------------------------------------------


def test_numbered_and_bulleted_entries_count_after_stripping_leading_whitespace() -> None:
    text = "Intro line\n  1. Extract 10 and 5\n\t2) Add them\n    - check the sum\n* done: 15\n• bullet\n+ plus bullet"
    assert parse_entries(text) == [
        "1. Extract 10 and 5",
        "2) Add them",
        "- check the sum",
        "* done: 15",
        "• bullet",
        "+ plus bullet",
    ]


def test_step_labels_and_parenthesised_numbers_are_numbered_entries() -> None:
    assert parse_entries("Step 1: take 10\n(2) add 5\n**3.** total 15") == [
        "Step 1: take 10",
        "(2) add 5",
        "**3.** total 15",
    ]


def test_lines_that_merely_start_with_a_digit_or_dash_are_not_entries() -> None:
    assert parse_entries("2023 was a year\n1.5 is a number\n-5 is negative\n**bold**") == []


def test_indented_numbered_trace_is_substantive() -> None:
    trace = parse_entries("  1. Extract 10 and 5\n    2. Add them to get 15")
    assert trace == ["1. Extract 10 and 5", "2. Add them to get 15"]
    assert trace_issues(trace, obtained=True) == []


@pytest.mark.parametrize("marker", NON_SUBSTANTIVE_MARKERS)
def test_each_non_substantive_marker_rejects_an_entry_case_insensitively(marker: str) -> None:
    assert not is_substantive(f"1. {marker}")
    assert not is_substantive(f"- {marker.upper()}")
    assert not is_substantive(f"  2. Something {marker.title()} here".strip())


def test_numbered_placeholder_trace_is_non_substantive() -> None:
    trace = parse_entries("1. N/A\n2. unavailable")
    assert trace_issues(trace, obtained=True) == [ISSUE_TRACE_NON_SUBSTANTIVE]


def test_rate_limit_message_trace_is_non_substantive() -> None:
    assert trace_issues(["- Rate limit exceeded, trace unavailable"], obtained=True) == [
        ISSUE_TRACE_NON_SUBSTANTIVE
    ]


@pytest.mark.parametrize(
    "entry",
    [
        "1. Compute the mean/average: 10 + 5",  # "mean/average" contains "n/a"
        "1. unavailableX",
        "- the API was UNAVAILABLE_temporarily",
        "2. Trace: no reasoningful steps, 10 + 5 = 15",
        "   3. see-n/a-note: 10 + 5",
    ],
)
def test_markers_are_matched_as_substrings_anywhere_in_the_entry(entry: str) -> None:
    assert not is_substantive(entry)
    assert trace_issues([entry], obtained=True) == [ISSUE_TRACE_NON_SUBSTANTIVE]


def test_entries_without_any_marker_substring_stay_substantive() -> None:
    assert is_substantive("1. Compute the average of 4 and 6")
    assert is_substantive("- Add 10 and 5 to get 15")


def test_bare_markers_without_content_are_not_substantive() -> None:
    assert not is_substantive("1.")
    assert not is_substantive("-")
    assert not is_substantive("2) ...")


def test_one_substantive_entry_is_enough() -> None:
    assert trace_issues(["1. N/A", "2. Add 10 and 5"], obtained=True) == []


def test_unstructured_prose_is_non_substantive() -> None:
    assert trace_issues(parse_entries("I think the answer is 15."), obtained=True) == [
        ISSUE_TRACE_NON_SUBSTANTIVE
    ]


def test_no_trace_at_all_is_reported_missing_and_non_substantive() -> None:
    assert trace_issues([], obtained=False) == [ISSUE_TRACE_MISSING, ISSUE_TRACE_NON_SUBSTANTIVE]


# --- chain of thought ---------------------------------------------------------------------


def test_numbered_task_reasoning_cannot_switch_off_the_operations_check() -> None:
    steps = parse_chain_of_thought("1. Extract 10 and 5\n2. The answer is 15", "10 + 5")
    assert len(steps) == 2
    assert check_chain_of_thought(steps, ["add"]) == ["Expected operations not in reasoning: add"]


def test_reasoning_steps_that_name_the_operation_satisfy_the_check() -> None:
    steps = parse_chain_of_thought("1. Extract 10 and 5\n2. Add them to get 15", "10 + 5")
    assert steps[1].operations == ("add",)
    assert check_chain_of_thought(steps, ["add"]) == []


def test_steps_are_inferred_from_the_expression_when_reasoning_is_absent() -> None:
    steps = parse_chain_of_thought(None, "(10 - 2) * 3 / 4")
    assert [s.operations for s in steps] == [("divide",), ("multiply",), ("subtract",)]


def test_missing_operations_are_listed_in_a_fixed_order() -> None:
    steps = parse_chain_of_thought(None, "10 / 2")
    issue = check_chain_of_thought(steps, ["add", "subtract", "multiply", "divide"])
    assert issue == ["Expected operations not in reasoning: add, subtract, multiply"]


def test_percentage_is_satisfied_by_multiplication_or_division() -> None:
    assert check_chain_of_thought(parse_chain_of_thought(None, "200 * 0.05"), ["percentage"]) == []


def test_no_steps_for_a_complex_operation_is_an_issue() -> None:
    assert check_chain_of_thought(parse_chain_of_thought(None, "15"), ["add"]) == [ISSUE_NO_STEPS]


# --- semantic facts -----------------------------------------------------------------------


def test_numbers_with_thousands_separators_decimals_and_percentages() -> None:
    facts = extract_semantic_facts(
        "A shop sold 1,200 pens at $2.50 each, 5% were returned and 15 percent lost."
    )
    assert [(n.text, n.value, n.is_percentage) for n in facts.numbers] == [
        ("1,200", "1200", False),
        ("2.50", "2.5", False),
        ("5%", "0.05", True),
        ("15 percent", "0.15", True),
    ]
    assert "percentage" in facts.operations


def test_percent_sign_at_the_end_of_a_clause_is_a_percentage() -> None:
    facts = extract_semantic_facts("What is 5% of 200?")
    assert [(n.value, n.is_percentage) for n in facts.numbers] == [("0.05", True), ("200", False)]
    assert facts.question_type == "percentage" or facts.question_type == "calculation"


def test_operations_are_matched_as_words_not_substrings() -> None:
    facts = extract_semantic_facts("Unless told otherwise, she often visits; the percent is shown.")
    assert "multiply" not in facts.operations  # "of" in "often", "times" nowhere
    assert "divide" not in facts.operations  # "per" only inside "percent"
    assert "subtract" not in facts.operations  # "less" only inside "unless"
    assert facts.operations == ["percentage"]


def test_explicit_operation_words_and_symbols_set_expectations() -> None:
    assert expected_operations("What is 10 plus 5 times 2?") == ["add", "multiply"]
    assert expected_operations("Compute 7 - 2 and 8 / 4") == ["subtract", "divide"]
    assert expected_operations("How many apples are left in total?") == []  # contextual words only


def test_entities_question_type_and_unit() -> None:
    facts = extract_semantic_facts(
        "Alice has 10 apples and Bob has 5. How many apples do they have together?"
    )
    assert facts.entities == ["Alice", "Bob"]
    assert facts.question_type == "quantity"
    assert facts.unit == "apples"
    assert facts.keywords == ["together"]
    assert facts.operations == ["add"]


def test_formula_missing_numbers_from_query_is_reported_in_query_order() -> None:
    query = "In 2023 Alice had 10 apples and got 5 more."
    facts = extract_semantic_facts(query)
    assert check_formula_semantics(facts, query, "10 + 5") == ["Formula missing numbers from query: [2023]"]


def test_percentages_match_as_fraction_or_as_written() -> None:
    query = "What is 15 percent of 80?"
    facts = extract_semantic_facts(query)
    assert check_formula_semantics(facts, query, "80 * 0.15") == []
    assert check_formula_semantics(facts, query, "80 * 15 / 100") == []


def test_explicit_operation_without_its_operator_is_reported() -> None:
    query = "Multiply 6 by 7, then subtract 2 and divide by 4."
    facts = extract_semantic_facts(query)
    assert check_formula_semantics(facts, query, "6 + 7 + 2 + 4") == [
        "Query mentions multiplication but formula doesn't contain '*'",
        "Query mentions subtraction but formula doesn't contain '-'",
        "Query mentions division but formula doesn't contain '/'",
    ]
    assert check_formula_semantics(facts, query, "(6 * 7 - 2) / 4") == []


def test_facts_are_identical_across_hash_seeds() -> None:
    script = (
        "import json;from engine.reasoning.facts import extract_semantic_facts as f;"
        "from engine.reasoning.trace import check_chain_of_thought as c, parse_chain_of_thought as p;"
        "q='Alice and Bob add 10 plus 5, multiply by 3, divide by 2, minus 1, 5% squared';"
        "print(json.dumps([f(q).model_dump(mode='json'), c(p(None, '1'), ['add','subtract','multiply','divide'])]))"
    )
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, check=True
        )
        outputs.add(done.stdout)
    assert len(outputs) == 1
    facts, issues = json.loads(outputs.pop())
    assert facts["operations"] == ["add", "subtract", "multiply", "divide", "exponent", "percentage"]
    assert issues == [ISSUE_NO_STEPS]
