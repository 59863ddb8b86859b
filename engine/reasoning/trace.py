"""Reasoning traces and chain-of-thought steps: parsing and the fail-closed substance gate.

An *entry* is a line that, after stripping leading whitespace, starts with a number marker
(``1.``, ``1)``, ``(1)``, ``1:``, ``Step 1:``) or a bullet (``-``, ``*``, ``•``, ``+``) followed
by whitespace. An entry is *substantive* when its body (the text after the marker) contains a
letter or digit and the entry, after stripping leading whitespace, contains none of
:data:`NON_SUBSTANTIVE_MARKERS` anywhere, case-insensitively: a plain substring test, so
``mean/average`` contains ``n/a`` and ``unavailableX`` contains ``unavailable`` (both rejected).
One substantive entry is enough.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.reasoning.evaluator import formula_operators
from engine.reasoning.facts import operations_in_text, ordered_operations

__all__ = [
    "ISSUE_NO_STEPS",
    "ISSUE_TRACE_MISSING",
    "ISSUE_TRACE_NON_SUBSTANTIVE",
    "MAX_ENTRY_LENGTH",
    "MAX_TRACE_ENTRIES",
    "NON_SUBSTANTIVE_MARKERS",
    "ChainOfThoughtStep",
    "check_chain_of_thought",
    "is_substantive",
    "parse_chain_of_thought",
    "parse_entries",
    "trace_issues",
]

ISSUE_TRACE_MISSING = "Reasoning trace missing"
ISSUE_TRACE_NON_SUBSTANTIVE = "Reasoning trace unavailable or non-substantive"
ISSUE_NO_STEPS = "No reasoning steps found for complex operation"

NON_SUBSTANTIVE_MARKERS = (
    "no llm provider",
    "could not generate reasoning trace",
    "no structured reasoning trace generated",
    "failed to generate reasoning trace",
    "n/a",
    "unavailable",
    "no reasoning",
    "rate limit exceeded",
)
MAX_TRACE_ENTRIES = 64
MAX_ENTRY_LENGTH = 1000

_ENTRY = re.compile(
    r"^(?:\*\*|__)?(?:(?:step\s*)?\(?\d{1,3}\s*[.):]|step\s*\d{1,3}|[-*•+])(?:\*\*|__)?(?=\s|$)"
    r"\s*(?P<body>.*)$",
    re.IGNORECASE,
)
_SYMBOL_TO_OPERATION = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide", "**": "exponent"}


def _entry_body(line: str) -> str | None:
    match = _ENTRY.match(line.strip())
    return match.group("body").strip() if match else None


def parse_entries(text: str) -> list[str]:
    """Numbered or bulleted entries of ``text``, stripped, in order (bounded in count and length)."""
    entries: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if _entry_body(stripped) is None:
            continue
        entries.append(stripped[:MAX_ENTRY_LENGTH])
        if len(entries) == MAX_TRACE_ENTRIES:
            break
    return entries


def is_substantive(entry: str) -> bool:
    """True for a numbered/bulleted entry with real content and no non-substantive marker."""
    body = _entry_body(entry)
    if body is None or not any(char.isalnum() for char in body):
        return False
    lowered = entry.lstrip().lower()
    return not any(marker in lowered for marker in NON_SUBSTANTIVE_MARKERS)


def trace_issues(trace: list[str], *, obtained: bool) -> list[str]:
    """The fail-closed gate. ``obtained`` is False when no provider produced any text at all."""
    if not obtained or not trace:
        missing = [ISSUE_TRACE_MISSING] if not obtained else []
        return [*missing, ISSUE_TRACE_NON_SUBSTANTIVE]
    if not any(is_substantive(entry) for entry in trace):
        return [ISSUE_TRACE_NON_SUBSTANTIVE]
    return []


@dataclass(frozen=True)
class ChainOfThoughtStep:
    """One step of the task's reasoning (or one inferred from its expression)."""

    number: int
    text: str
    operations: tuple[str, ...]


def parse_chain_of_thought(reasoning: str | None, expression: str) -> list[ChainOfThoughtStep]:
    """Steps from ``reasoning`` entries; if there are none, one step per operator of the expression."""
    steps: list[ChainOfThoughtStep] = []
    for entry in parse_entries(reasoning or ""):
        body = _entry_body(entry) or ""
        steps.append(ChainOfThoughtStep(len(steps) + 1, entry, tuple(operations_in_text(body))))
    if steps:
        return steps
    for symbol in formula_operators(expression):
        operation = _SYMBOL_TO_OPERATION.get(symbol)
        if operation is not None:
            steps.append(ChainOfThoughtStep(len(steps) + 1, f"{operation} ({symbol})", (operation,)))
    return steps


def check_chain_of_thought(steps: list[ChainOfThoughtStep], expected: list[str]) -> list[str]:
    """Issues when the steps do not cover the operations the query explicitly asks for."""
    if not expected:
        return []
    if not steps:
        return [ISSUE_NO_STEPS]
    covered = {op for step in steps for op in step.operations}
    missing = [op for op in expected if op not in covered]
    if "percentage" in missing and covered & {"multiply", "divide"}:
        missing.remove("percentage")
    if not missing:
        return []
    return [f"Expected operations not in reasoning: {', '.join(ordered_operations(missing))}"]
