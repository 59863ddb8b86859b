"""What the market asks: threshold quantities, comparators and the kind of event.

Cournot strips ``,`` and ``$`` from thresholds and silently drops "100,000 USD" into a rule where any
positive price means YES; it matches comparison words as substrings ("overall" contains "over") and
reads "at least" as strict ``>``. Here:

* thresholds parse exactly (``Decimal``) in the forms ``100000``, ``100,000``, ``$100k``, ``1.5M``,
  ``5%``, ``100000 USD``, ``1e6``; anything else is *unparseable* and reported, never guessed;
* comparators are matched as whole words or symbols, longest phrase first, with negation
  ("does not exceed" is ``<=``); two different comparators in one text are *ambiguous*;
* the structured ``predicate`` wins over ``event_definition``; a disagreement is reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Context, Decimal, InvalidOperation
from functools import lru_cache

from engine.comparison import compare
from engine.schemas import PromptSpec

__all__ = [
    "COMPARATORS",
    "ComparatorMatch",
    "EventSpec",
    "Quantity",
    "compare",
    "derive_event_spec",
    "find_comparators",
    "parse_quantity",
]

COMPARATORS = (">", ">=", "<", "<=", "==")

_QUANTITY = re.compile(
    r"(?P<sign>[-+\u2212])?\s*(?P<currency>us\$|\$|€|£|¥)?\s*(?P<sign2>[-+\u2212])?\s*"
    r"(?P<digits>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?:e(?P<exponent>[-+]?\d{1,2}))?\s*"
    r"(?P<multiplier>(?:thousand|million|billion|trillion|mm|mn|bn|tn|k|m|b|t)(?![a-z]))?\s*"
    r"(?P<percent>%|percent(?![a-z]))?\s*"
    r"(?P<unit>[a-z]{2,8})?",
    re.IGNORECASE,
)
_MULTIPLIERS = {
    "k": 3, "thousand": 3, "m": 6, "mm": 6, "mn": 6, "million": 6,
    "b": 9, "bn": 9, "billion": 9, "t": 12, "tn": 12, "trillion": 12,
}  # fmt: skip
_UNITS = frozenset(
    {"usd", "usdt", "usdc", "eur", "gbp", "jpy", "btc", "eth", "sol", "dollar", "dollars", "euro", "euros"}
)
_CURRENCY_UNITS = {"$": "usd", "us$": "usd", "€": "eur", "£": "gbp", "¥": "jpy"}
_DECIMAL = Context(prec=80)
_MAX_DIGITS = 40

_PHRASES: dict[str, tuple[str, ...]] = {
    ">=": (
        "greater than or equal to", "greater than or equal", "more than or equal to", "equal to or greater than",
        "equal to or more than", "equal or greater", "greater or equal", "above or equal", "exceeds or equals",
        "exceed or equal", "at or above", "on or above", "at or over", "at least", "or more", "or higher",
        "or above", "or greater", "or over", "no less than", "no fewer than", "gte", ">=", "=>", "≥",
    ),
    "<=": (
        "less than or equal to", "less than or equal", "equal to or less than", "equal or less", "less or equal",
        "below or equal", "at or below", "on or below", "at or under", "at most", "or less", "or lower",
        "or below", "or fewer", "or under", "no more than", "lte", "<=", "=<", "≤",
    ),
    ">": (
        "greater than", "more than", "higher than", "larger than", "above", "over", "exceeds", "exceed",
        "exceeded", "exceeding", "surpasses", "surpass", "surpassed", "gt", ">",
    ),
    "<": ("less than", "fewer than", "lower than", "smaller than", "below", "under", "beneath", "lt", "<"),
    "==": ("equal to", "equals", "equal", "exactly", "eq", "==", "="),
    "!=": ("!=", "≠"),
    "between": ("between",),
}  # fmt: skip
_NEGATIONS = frozenset({"not", "no", "never"})
_INVERSE = {">": "<=", ">=": "<", "<": ">=", "<=": ">"}
_TOKENS = re.compile(r"[a-z]+|>=|<=|==|!=|=>|=<|[≥≤≠><=]")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+")
_CONTRACTION = re.compile(r"n['’]t\b")


def _phrase_index() -> dict[str, list[tuple[tuple[str, ...], str]]]:
    """Phrases keyed by their first token, longest first."""
    index: dict[str, list[tuple[tuple[str, ...], str]]] = {}
    for comparator, phrases in _PHRASES.items():
        for phrase in phrases:
            tokens = tuple(_TOKENS.findall(phrase))
            index.setdefault(tokens[0], []).append((tokens, comparator))
    for entries in index.values():
        entries.sort(key=lambda entry: -len(entry[0]))
    return index


_PHRASE_INDEX = _phrase_index()


@dataclass(frozen=True)
class Quantity:
    """A parsed threshold: exact value (int when integral), unit (``usd``, ``percent``…) and source text."""

    value: int | float
    unit: str | None
    text: str


@lru_cache(maxsize=1024)
def parse_quantity(text: str) -> Quantity | None:
    """Parse a threshold such as ``$100k``, ``100,000``, ``1.5M``, ``5%`` or ``100000 USD``; None if not exact."""
    stripped = text.strip()
    match = _QUANTITY.fullmatch(stripped)
    if match is None or len(match.group("digits")) > _MAX_DIGITS:
        return None
    signs = [sign for sign in (match.group("sign"), match.group("sign2")) if sign]
    currency, unit, percent = match.group("currency"), match.group("unit"), match.group("percent")
    if len(signs) > 1 or (currency and percent) or (unit and percent):
        return None
    unit_name = unit.lower() if unit else None
    if unit_name is not None and unit_name not in _UNITS:
        return None
    if currency:
        implied = _CURRENCY_UNITS[currency.lower()]
        if unit_name is not None and unit_name != implied:
            return None
        unit_name = implied
    try:
        number = Decimal(match.group("digits").replace(",", ""))
    except InvalidOperation:  # pragma: no cover - the pattern admits only decimal digits
        return None
    shift = int(match.group("exponent") or 0) + _MULTIPLIERS.get((match.group("multiplier") or "").lower(), 0)
    number = _DECIMAL.multiply(number, _DECIMAL.power(Decimal(10), shift))
    if signs and signs[0] in "-\u2212":
        number = -number
    value = _to_number(number)
    if value is None:
        return None
    return Quantity(value=value, unit="percent" if percent else unit_name, text=stripped)


def _to_number(number: Decimal) -> int | float | None:
    if number == number.to_integral_value():
        return int(number)
    as_float = float(number)
    if as_float == 0.0 or abs(as_float) == float("inf"):
        return None
    return as_float


@dataclass(frozen=True)
class ComparatorMatch:
    """One comparison phrase found in a text, with the comparator it states (after negation)."""

    comparator: str
    phrase: str


@lru_cache(maxsize=1024)
def _comparators(text: str) -> tuple[ComparatorMatch, ...]:
    lowered = _CONTRACTION.sub(" not", _URL.sub(" ", text.lower()))
    tokens = _TOKENS.findall(lowered)
    found: list[ComparatorMatch] = []
    position = 0
    while position < len(tokens):
        for phrase, comparator in _PHRASE_INDEX.get(tokens[position], ()):
            if tuple(tokens[position : position + len(phrase)]) == phrase:
                words = " ".join(phrase)
                negated = position > 0 and tokens[position - 1] in _NEGATIONS and phrase[0] not in _NEGATIONS
                if negated:
                    comparator = _INVERSE.get(comparator, "!=")
                    words = f"{tokens[position - 1]} {words}"
                found.append(ComparatorMatch(comparator=comparator, phrase=words))
                position += len(phrase)
                break
        else:
            position += 1
    return tuple(found)


def find_comparators(text: str) -> list[ComparatorMatch]:
    """Every comparison phrase in ``text``, left to right, longest phrase first, negation applied."""
    return list(_comparators(text))


@dataclass(frozen=True)
class EventSpec:
    """How the event is evaluated, or the problems that prevent it.

    ``kind`` is ``threshold`` (numeric comparison), ``text_equals`` (``==`` against a textual
    threshold), ``boolean`` (the evidence states the event) or ``multi_choice`` (the evidence names
    one of ``outcomes``). ``needed_kind`` is the claim kind that can decide it.
    """

    kind: str
    needed_kind: str
    comparator: str | None = None
    comparator_phrase: str | None = None
    comparator_source: str | None = None
    threshold: Quantity | None = None
    threshold_text: str | None = None
    outcomes: tuple[str, ...] = ()
    problems: tuple[tuple[str, str], ...] = ()
    """``(code, message)`` pairs; any problem makes the evidence insufficient."""
    warnings: tuple[str, ...] = ()

    @property
    def computable(self) -> bool:
        """True when nothing prevents evaluating the event."""
        return not self.problems


def _single(matches: list[ComparatorMatch]) -> tuple[ComparatorMatch | None, str | None]:
    distinct = list(dict.fromkeys(match.comparator for match in matches))
    if not distinct:
        return None, None
    if "between" in distinct:
        return None, "range comparisons ('between') are not supported; state one bound per market"
    if "!=" in distinct:
        return None, "inequality ('not equal') cannot be evaluated against one threshold"
    if len(distinct) > 1:
        phrases = ", ".join(f"'{match.phrase}' ({match.comparator})" for match in matches)
        return None, f"ambiguous comparison: {phrases}"
    return matches[0], None


def derive_event_spec(prompt_spec: PromptSpec) -> EventSpec:
    """Read market type, predicate, threshold and event definition into an :class:`EventSpec`."""
    market = prompt_spec.market
    semantics = prompt_spec.prediction_semantics
    if market.market_type == "multi_choice":
        return EventSpec(
            kind="multi_choice", needed_kind="text_assertion", outcomes=tuple(market.possible_outcomes)
        )
    predicate, threshold, definition = semantics.predicate, semantics.threshold, market.event_definition
    if type(predicate) is str and type(definition) is str and (threshold is None or type(threshold) is str):
        return _event_spec(predicate, threshold, definition)  # the bundles of one market share it
    return _event_spec.__wrapped__(predicate, threshold, definition)


@lru_cache(maxsize=1024)
def _event_spec(predicate: str, threshold: str | None, event_definition: str) -> EventSpec:
    """:func:`derive_event_spec` of a non-multi-choice market (an immutable value, so cached)."""
    predicate_match, predicate_problem = _single(find_comparators(predicate))
    if threshold is not None:
        return _threshold_spec(threshold, predicate_match, predicate_problem, event_definition)
    if predicate_problem is not None:
        problem = ("comparator_unparseable", f"predicate: {predicate_problem}")
        return EventSpec(kind="threshold", needed_kind="numeric", problems=(problem,))
    if predicate_match is not None:
        message = f"predicate states a comparison ('{predicate_match.phrase}') but prediction_semantics.threshold is missing"
        return EventSpec(
            kind="threshold",
            needed_kind="numeric",
            comparator=predicate_match.comparator,
            comparator_phrase=predicate_match.phrase,
            comparator_source="predicate",
            problems=(("threshold_missing", message),),
        )
    return EventSpec(kind="boolean", needed_kind="boolean")


def _threshold_spec(
    threshold_text: str,
    predicate_match: ComparatorMatch | None,
    predicate_problem: str | None,
    event_definition: str,
) -> EventSpec:
    chosen, source = predicate_match, "predicate"
    warnings: list[str] = []
    problems: list[tuple[str, str]] = []
    definition_match, definition_problem = _single(find_comparators(event_definition))
    if predicate_problem is not None:
        problems.append(("comparator_unparseable", f"predicate: {predicate_problem}"))
    elif chosen is None:
        chosen, source = definition_match, "event_definition"
        if definition_problem is not None:
            problems.append(("comparator_unparseable", f"event_definition: {definition_problem}"))
        elif chosen is None:
            problems.append(
                ("comparator_missing", "neither predicate nor event_definition states a comparison")
            )
    elif definition_match is not None and definition_match.comparator != chosen.comparator:
        warnings.append(
            f"event_definition states '{definition_match.phrase}' ({definition_match.comparator}) but the "
            f"predicate states '{chosen.phrase}' ({chosen.comparator}); the predicate is used"
        )
    quantity = parse_quantity(threshold_text)
    kind, needed = "threshold", "numeric"
    if quantity is None:
        if chosen is not None and chosen.comparator == "==" and threshold_text.strip():
            kind, needed = "text_equals", "text_assertion"
        else:
            problems.append(("threshold_unparseable", f"threshold {threshold_text!r} is not an exact number"))
    return EventSpec(
        kind=kind,
        needed_kind=needed,
        comparator=chosen.comparator if chosen else None,
        comparator_phrase=chosen.phrase if chosen else None,
        comparator_source=source if chosen else None,
        threshold=quantity,
        threshold_text=threshold_text,
        problems=tuple(problems),
        warnings=tuple(warnings),
    )
