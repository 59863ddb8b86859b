"""Extraction settings declared by the market, and regex patterns with a bounded cost.

Where settings live (``DataRequirement`` has no ``extra`` in Cournot's shape, so per-requirement
settings are keyed by requirement id inside ``PromptSpec.extra``)::

    "extra": {
      "extraction_patterns": {"price": "BTC/USD[^0-9]{0,40}(?P<value>[0-9][0-9,]*(?:\\.[0-9]+)?)"},
      "requirement_extra": {
        "req_price": {
          "expected_fields": ["price_usd"],              # used when DataRequirement.expected_fields is null
          "field_aliases": {"price_usd": ["bitcoin.usd", "price"]},
          "value_field": "price_usd",                     # default: first non-time expected field
          "extraction_patterns": [{"name": "price", "pattern": "...", "kind": "numeric"}]
        }
      }
    }

Patterns are a mapping (applied in name order) or a list of ``{name, pattern, kind?}`` (applied in
list order). A pattern's value is its ``value`` group, else group 1, else the whole match.

Regex cost is bounded three ways: pattern length, a refusal of the catastrophic-backtracking shapes
(nested quantifiers such as ``(a+)+``, adjacent overlapping runs such as ``\\d+\\d+``; see
:mod:`engine.auditor.reasoning.regex_guard`), and a cap on the scanned text; only the first match
counts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final, TypeGuard

from engine.auditor.reasoning.regex_guard import regex_risk
from engine.auditor.record import Record
from engine.schemas import DataRequirement, PromptSpec

__all__ = ["PATTERN_KINDS", "ExtractionSpec", "Pattern", "compile_pattern", "extraction_spec"]

PATTERN_KINDS = ("numeric", "boolean", "text_assertion", "timestamp")
_CACHE_LIMIT = 512
_cache: dict[str, re.Pattern[str] | str] = {}


@dataclass(frozen=True)
class Pattern:
    """A named, compiled extraction pattern and its declared kind (None: inferred from the capture)."""

    name: str
    regex: re.Pattern[str]
    kind: str | None


class ExtractionSpec(Record):
    """How to extract claims for one requirement."""

    FIELDS: ClassVar[tuple[str, ...]] = ("fields", "aliases", "value_field", "patterns", "problems")
    __slots__ = FIELDS

    def __init__(
        self,
        fields: tuple[str, ...] | None,
        aliases: Mapping[str, tuple[str, ...]],
        value_field: str | None,
        patterns: tuple[Pattern, ...],
        problems: tuple[str, ...],
    ) -> None:
        self.fields: Final = fields
        self.aliases: Final = aliases
        self.value_field: Final = value_field
        self.patterns: Final = patterns
        self.problems: Final = problems


def _is_mapping(value: object) -> TypeGuard[Mapping[Any, Any]]:
    """``isinstance(value, Mapping)``, answering dicts and None without the ABC's instance check."""
    kind = type(value)
    if kind is dict:
        return True
    return value is not None and isinstance(value, Mapping)


def compile_pattern(pattern: str, max_chars: int) -> re.Pattern[str] | str:
    """Compile ``pattern`` once (cached); returns the regex or a message saying why it was refused."""
    if len(pattern) > max_chars:
        return f"pattern longer than {max_chars} characters"
    cached = _cache.get(pattern)
    if cached is not None:
        return cached
    result: re.Pattern[str] | str
    try:
        result = re.compile(pattern)
    except re.error as exc:
        result = f"invalid regular expression: {exc}"
    else:
        risk = regex_risk(pattern)
        if risk is not None:
            result = risk
    if len(_cache) >= _CACHE_LIMIT:
        _cache.clear()
    _cache[pattern] = result
    return result


def _pattern_entries(raw: object, where: str, problems: list[str]) -> list[tuple[str, object, object]]:
    """``(name, pattern, kind)`` entries in their application order."""
    if raw is None:
        return []
    if _is_mapping(raw):
        entries: list[tuple[str, object, object]] = []
        for name in sorted(raw):
            value = raw[name]
            if _is_mapping(value):
                entries.append((name, value.get("pattern"), value.get("kind")))
            else:
                entries.append((name, value, None))
        return entries
    if isinstance(raw, list):
        listed: list[tuple[str, object, object]] = []
        for position, entry in enumerate(raw):
            if _is_mapping(entry) and isinstance(entry.get("name"), str):
                listed.append((entry["name"], entry.get("pattern"), entry.get("kind")))
            else:
                problems.append(f"{where}[{position}] must be an object with a string 'name'")
        return listed
    problems.append(f"{where} must be an object or a list")
    return []


def _patterns(raw: object, where: str, max_chars: int, problems: list[str]) -> dict[str, Pattern]:
    patterns: dict[str, Pattern] = {}
    for name, pattern, kind in _pattern_entries(raw, where, problems):
        if not isinstance(pattern, str) or not pattern:
            problems.append(f"{where}.{name}: pattern must be a non-empty string")
            continue
        if kind is not None and kind not in PATTERN_KINDS:
            problems.append(f"{where}.{name}: kind must be one of {', '.join(PATTERN_KINDS)}")
            continue
        compiled = compile_pattern(pattern, max_chars)
        if isinstance(compiled, str):
            problems.append(f"{where}.{name}: {compiled}")
            continue
        patterns[name] = Pattern(name=name, regex=compiled, kind=kind if isinstance(kind, str) else None)
    return patterns


def _string_list(raw: object, where: str, problems: list[str]) -> tuple[str, ...] | None:
    if raw is None:
        return None
    if isinstance(raw, list) and all(isinstance(item, str) and item for item in raw):
        return tuple(raw)
    problems.append(f"{where} must be a list of non-empty strings")
    return None


def _aliases(raw: object, where: str, problems: list[str]) -> dict[str, tuple[str, ...]]:
    if raw is None:
        return {}
    if not _is_mapping(raw):
        problems.append(f"{where} must be an object")
        return {}
    aliases: dict[str, tuple[str, ...]] = {}
    for field in sorted(raw):
        listed = _string_list(raw[field], f"{where}.{field}", problems)
        if listed is not None:
            aliases[field] = listed
    return aliases


def extraction_spec(
    prompt_spec: PromptSpec, requirement: DataRequirement | None, requirement_id: str, max_chars: int
) -> ExtractionSpec:
    """Collect fields, aliases, value field and patterns for ``requirement_id`` from the prompt spec."""
    problems: list[str] = []
    extra: Mapping[str, Any] = prompt_spec.extra
    patterns = _patterns(extra.get("extraction_patterns"), "extra.extraction_patterns", max_chars, problems)
    per_requirement: object = {}
    table = extra.get("requirement_extra")
    if _is_mapping(table):
        per_requirement = table.get(requirement_id) or {}
    elif table is not None:
        problems.append("extra.requirement_extra must be an object keyed by requirement_id")
    if not _is_mapping(per_requirement):
        problems.append(f"extra.requirement_extra.{requirement_id} must be an object")
        per_requirement = {}
    where = f"extra.requirement_extra.{requirement_id}"
    patterns.update(
        _patterns(
            per_requirement.get("extraction_patterns"), f"{where}.extraction_patterns", max_chars, problems
        )
    )
    fields = requirement.expected_fields if requirement is not None else None
    declared = (
        tuple(fields)
        if fields is not None
        else _string_list(per_requirement.get("expected_fields"), f"{where}.expected_fields", problems)
    )
    value_field = per_requirement.get("value_field")
    if value_field is not None and not isinstance(value_field, str):
        problems.append(f"{where}.value_field must be a string")
        value_field = None
    return ExtractionSpec(
        fields=declared,
        aliases=_aliases(per_requirement.get("field_aliases"), f"{where}.field_aliases", problems),
        value_field=value_field,
        patterns=tuple(patterns.values()),
        problems=tuple(problems),
    )
