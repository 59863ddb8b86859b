"""Semantic fact extraction from the query, and the formula heuristics built on it.

Words are matched as whole words (``of`` never matches ``often``, ``per`` never ``percent``),
numbers accept thousands separators (``1,200``), decimals and percentages (``5%``, ``5 %``,
``5 percent``), and every output list has a deterministic order (order of appearance, or the
fixed order of :data:`OPERATIONS`): nothing depends on set iteration order.

Operation words come in two tiers. *Explicit* words (``add``, ``minus``, ``times``, ...) and
symbols set expectations that the formula and the chain of thought must meet; *contextual*
words (``total``, ``left``, ``each``, ...) are recorded as facts and recognised in reasoning steps,
but are too ambiguous to demand a specific operator.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from engine.reasoning.evaluator import format_decimal, formula_operators
from engine.reasoning.models import NumberFact, SemanticFacts

__all__ = [
    "OPERATIONS",
    "check_formula_semantics",
    "expected_operations",
    "extract_semantic_facts",
    "formula_numbers",
    "operations_in_text",
    "ordered_operations",
]

OPERATIONS = ("add", "subtract", "multiply", "divide", "exponent", "percentage")

_EXPLICIT_WORDS: dict[str, tuple[str, ...]] = {
    "add": ("add", "adds", "added", "adding", "plus", "sum"),
    "subtract": ("subtract", "subtracts", "subtracted", "subtracting", "minus"),
    "multiply": ("multiply", "multiplies", "multiplied", "multiplying", "times", "product"),
    "divide": ("divide", "divides", "divided", "dividing", "quotient"),
    "exponent": ("squared", "cubed", "power", "exponent", "exponential"),
    "percentage": ("percent", "percentage", "percentages"),
}
_CONTEXT_WORDS: dict[str, tuple[str, ...]] = {
    "add": ("total", "together", "combined", "combine", "altogether", "increase", "increased"),
    "subtract": (
        "remove",
        "removed",
        "eat",
        "eats",
        "ate",
        "lose",
        "loses",
        "lost",
        "decrease",
        "decreased",
        "spent",
        "spend",
        "gave",
        "give",
        "left",
        "remain",
        "remaining",
        "fewer",
        "less",
        "difference",
    ),
    "multiply": ("each", "twice", "double", "doubled", "triple", "tripled"),
    "divide": ("split", "share", "shared", "ratio", "average", "half", "per"),
    "exponent": (),
    "percentage": (),
}
_SYMBOLS: dict[str, re.Pattern[str]] = {
    "add": re.compile(r"\d\s*\+\s*[\d.(]"),
    "subtract": re.compile(r"\d\s*[-−]\s*[\d.(]"),
    "multiply": re.compile(r"\d\s*(?:\*(?!\*)|×)\s*[\d.(]"),
    "divide": re.compile(r"\d\s*[/÷]\s*[\d.(]"),
    "exponent": re.compile(r"\d\s*(?:\^|\*\*)\s*[\d.(]"),
    "percentage": re.compile(r"\d\s*%"),
}


def _word_pattern(words: tuple[str, ...]) -> re.Pattern[str] | None:
    if not words:
        return None
    alternatives = "|".join(re.escape(word) for word in sorted(words, key=lambda w: (-len(w), w)))
    return re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w-])", re.IGNORECASE)


_EXPLICIT = {op: _word_pattern(words) for op, words in _EXPLICIT_WORDS.items()}
_CONTEXT = {op: _word_pattern(words) for op, words in _CONTEXT_WORDS.items()}
_ALL_WORDS = _word_pattern(
    tuple(w for table in (_EXPLICIT_WORDS, _CONTEXT_WORDS) for ws in table.values() for w in ws)
)

_NUMBER = re.compile(
    r"(?<![\w.,])(?P<int>\d{1,3}(?:,\d{3})+(?![\d,])|\d+)(?P<frac>\.\d+)?"
    r"(?P<pct>\s?%|\s+per\s?cent(?:age)?\b)?",
    re.IGNORECASE,
)
_FORMULA_NUMBER = re.compile(r"(?<![\w.])(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?")
_ENTITY = re.compile(r"\b[A-Z][a-z]+\b")
# fmt: off
_NOT_ENTITIES = frozenset((
    "A", "An", "And", "After", "Also", "At", "Before", "But", "Calculate", "Compute", "Each",
    "Every", "Find", "For", "He", "Her", "His", "How", "I", "If", "In", "It", "Its", "Of", "On",
    "She", "So", "That", "The", "Their", "Then", "There", "These", "They", "This", "To", "Twice",
    "We", "What", "When", "Where", "Which", "Who", "Why", "With", "You",
))
_UNIT_AFTER_NUMBER = re.compile(r"\d(?:[\d,.]*\d)?\s+([A-Za-z]+)")
_HOW_MANY = re.compile(r"\bhow\s+many\s+([A-Za-z]+)", re.IGNORECASE)
_CURRENCY = (("$", "USD"), ("€", "EUR"), ("£", "GBP"))
_UNIT_STOP = frozenset((
    "and", "or", "of", "in", "on", "at", "to", "for", "with", "more", "less", "percent", "per",
    "cent", "times",
))
# fmt: on


def ordered_operations(found: set[str] | list[str]) -> list[str]:
    """``found`` in the fixed order of :data:`OPERATIONS`."""
    return [op for op in OPERATIONS if op in found]


def operations_in_text(text: str, *, explicit_only: bool = False) -> list[str]:
    """Operations a piece of text mentions, by whole words and arithmetic symbols."""
    found: set[str] = set()
    for op in OPERATIONS:
        patterns = [_EXPLICIT[op]] if explicit_only else [_EXPLICIT[op], _CONTEXT[op]]
        if any(p is not None and p.search(text) for p in patterns) or _SYMBOLS[op].search(text):
            found.add(op)
    return ordered_operations(found)


def expected_operations(query: str) -> list[str]:
    """Operations the query demands explicitly (words of the explicit tier or symbols)."""
    return operations_in_text(query, explicit_only=True)


def _numbers(query: str) -> list[NumberFact]:
    facts: list[NumberFact] = []
    seen: set[tuple[str, bool]] = set()
    for match in _NUMBER.finditer(query):
        digits = match.group("int").replace(",", "") + (match.group("frac") or "")
        try:
            value = Decimal(digits)
        except InvalidOperation:  # pragma: no cover - the regex only yields digits
            continue
        is_pct = match.group("pct") is not None
        if is_pct:
            value = value / 100
        key = (format_decimal(value), is_pct)
        if key in seen:
            continue
        seen.add(key)
        facts.append(NumberFact(text=match.group(0).strip(), value=key[0], is_percentage=is_pct))
    return facts


def _question_type(lowered: str) -> str | None:
    if re.search(r"\bwhat\s+(?:percent|percentage)\b", lowered):
        return "percentage"
    if re.search(r"\bhow\s+(?:many|much)\b", lowered):
        return "quantity"
    if re.search(r"\b(?:what\s+is|what's|calculate|compute|find)\b", lowered):
        return "calculation"
    if re.search(r"\bpercent|%", lowered):
        return "percentage"
    return None


def _unit(query: str) -> str | None:
    match = _HOW_MANY.search(query)
    if match and match.group(1).lower() not in _UNIT_STOP:
        return match.group(1).lower()
    for symbol, code in _CURRENCY:
        if re.search(re.escape(symbol) + r"\s?\d", query):
            return code
    for match in _UNIT_AFTER_NUMBER.finditer(query):
        word = match.group(1).lower()
        if word not in _UNIT_STOP:
            return word
    return None


def extract_semantic_facts(query: str) -> SemanticFacts:
    """Numbers, operations, keywords, entities, question type and unit of a query."""
    keywords: list[str] = []
    if _ALL_WORDS is not None:
        for match in _ALL_WORDS.finditer(query):
            word = match.group(0).lower()
            if word not in keywords:
                keywords.append(word)
    entities: list[str] = []
    for match in _ENTITY.finditer(query):
        word = match.group(0)
        if word not in _NOT_ENTITIES and word not in entities:
            entities.append(word)
    numbers = _numbers(query)
    operations = set(operations_in_text(query))
    if any(number.is_percentage for number in numbers):
        operations.add("percentage")
    return SemanticFacts(
        numbers=numbers,
        operations=ordered_operations(operations),
        keywords=keywords,
        entities=entities,
        question_type=_question_type(query.lower()),
        unit=_unit(query),
    )


def formula_numbers(formula: str) -> list[Decimal]:
    """Numeric literals written in a formula, in order."""
    values: list[Decimal] = []
    for match in _FORMULA_NUMBER.finditer(formula):
        try:
            values.append(Decimal(match.group(0).replace("_", "")))
        except InvalidOperation:
            continue
    return values


def _present(number: NumberFact, literals: list[Decimal]) -> bool:
    value = Decimal(number.value)
    candidates = [value, value * 100] if number.is_percentage else [value]
    return any(
        abs(candidate - literal) <= Decimal("1e-9") * max(Decimal(1), abs(literal))
        for candidate in candidates
        for literal in literals
    )


_OPERATOR_CHECKS = (
    ("multiply", "*", "Query mentions multiplication but formula doesn't contain '*'"),
    ("subtract", "-", "Query mentions subtraction but formula doesn't contain '-'"),
    ("divide", "/", "Query mentions division but formula doesn't contain '/'"),
)


def check_formula_semantics(facts: SemanticFacts, query: str, formula: str) -> list[str]:
    """Heuristic issues: query numbers absent from the formula, explicit operations without operator."""
    issues: list[str] = []
    literals = formula_numbers(formula)
    missing = [number.text for number in facts.numbers if not _present(number, literals)]
    if missing:
        issues.append(f"Formula missing numbers from query: [{', '.join(missing)}]")
    operators = formula_operators(formula)
    expected = expected_operations(query)
    for op, symbol, message in _OPERATOR_CHECKS:
        if op not in expected:
            continue
        present = symbol in operators or (symbol == "-" and "neg" in operators)
        if not present and not operators:
            present = symbol in formula.replace("**", "")
        if not present:
            issues.append(message)
    return issues
