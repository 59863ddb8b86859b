"""Deterministic extraction of claims from evidence items.

A claim is one value read from one evidence item at one place. Extraction never depends on the
JSON key order of a payload: declared fields are read in declaration order, the fallback search and
the time-field search walk keys in sorted order, and claims are listed sorted by path.

* JSON (``content_type`` contains ``json``, or a dict/list ``parsed_value``): the requirement's
  ``expected_fields`` (with ``field_aliases``) are looked up in ``extracted_fields`` then in
  ``parsed_value``; without declared fields the minimal common fields (:data:`DEFAULT_FIELDS`) are
  read at top level, then searched inside ``parsed_value`` in sorted key order.
* text/html: the declared regex patterns (see :mod:`engine.auditor.reasoning.patterns`).
* ISO-8601 strings with an offset, and epoch numbers under a field whose name denotes a time
  (``timestamp``, ``last_updated_at``, ``closeTime``), become ``timestamp`` claims; the first
  declared one (else the best-named one found) is the item's observation time.

``claim_id = "cl_" + sha256(evidence_id + "|" + path + "|" + canonical(value)).hexdigest()[:12]``.
"""

from __future__ import annotations

import hashlib
import importlib
import math
from collections.abc import Iterator
from datetime import datetime
from json.encoder import encode_basestring
from typing import Any, ClassVar, Final

from engine.auditor.config import AuditConfig
from engine.auditor.reasoning.claims import Claim, ItemClaims
from engine.auditor.reasoning.item_fields import ItemFields, item_fields
from engine.auditor.reasoning.patterns import ExtractionSpec, Pattern, extraction_spec
from engine.auditor.reasoning.semantics import parse_quantity
from engine.auditor.reasoning.values import (
    MISSING,
    format_time,
    is_finite_number,
    is_time_name,
    lookup,
    parse_plain_number,
    parse_time,
    split_path,
)
from engine.auditor.record import Record
from engine.canonical import dumps_canonical
from engine.jsonio import StrictJSONError, loads_strict
from engine.schemas import DataRequirement, EvidenceBundle, PromptSpec

__all__ = [
    "DEFAULT_FIELDS",
    "Claim",
    "ClaimExtractor",
    "ClaimSet",
    "ItemClaims",
    "make_claim_id",
    "short_sha256_hex",
]

DEFAULT_FIELDS: Final[tuple[str, ...]] = (
    "price_usd",
    "usd",
    "price",
    "value",
    "amount",
    "result",
    "outcome",
    "winner",
    "timestamp",
)
_DEFAULT_SET: Final = frozenset(DEFAULT_FIELDS)
_TIME_PREFERENCE: Final[tuple[str, ...]] = (
    "timestamp",
    "observed_at",
    "as_of",
    "last_updated_at",
    "updated_at",
    "close_time",
    "closetime",
)
_JSON_CONFIDENCE: Final[tuple[float, ...]] = (0.5, 0.7, 0.8, 0.9, 0.95)
_REGEX_CONFIDENCE: Final[tuple[float, ...]] = (0.4, 0.6, 0.7, 0.8, 0.85)
_AUTO_RANK: Final = 10_000
_TRUE_WORDS: Final = frozenset({"true", "yes"})
_FALSE_WORDS: Final = frozenset({"false", "no"})


def _canonical_scalar(value: Any) -> str:
    """``dumps_canonical(value)``, with a fast path for the scalars claims hold."""
    kind = type(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is int or (kind is float and math.isfinite(value)):
        return repr(value)  # an exact int or float: its type's own repr, one direct call
    if kind is str:
        text: str = encode_basestring(value)  # the escaping json.dumps(ensure_ascii=False) applies
        return text
    return dumps_canonical(value)


def _builtin_sha256() -> Any:
    """CPython's own SHA-256 (``_sha256``), else :func:`hashlib.sha256` when a build lacks it.

    Both compute the same digest; the built-in one starts and finishes a hash several times faster
    (no OpenSSL context to fetch and copy), which is most of the cost for the short ids hashed here.
    """
    try:
        return importlib.import_module("_sha256").sha256
    except (ImportError, AttributeError):  # no built-in module: the OpenSSL one computes the same digest
        return hashlib.sha256


_SHORT_SHA256: Final = _builtin_sha256()
_SHORT_INPUT: Final = 128
"""Up to this many bytes the built-in hash is faster; beyond, OpenSSL's block function wins."""


def short_sha256_hex(data: bytes) -> str:
    """``hashlib.sha256(data).hexdigest()``, computed by the faster implementation for its length."""
    digest: str = (_SHORT_SHA256 if len(data) <= _SHORT_INPUT else hashlib.sha256)(data).hexdigest()
    return digest


def make_claim_id(evidence_id: str, path: str, value: Any) -> str:
    """``cl_`` + the first 12 hex characters of ``sha256(evidence_id|path|canonical(value))``."""
    preimage = f"{evidence_id}|{path}|{_canonical_scalar(value)}".encode()
    return "cl_" + short_sha256_hex(preimage)[:12]


class ClaimSet(Record):
    """All claims of a bundle, item by item in bundle order, plus extraction-config problems."""

    FIELDS: ClassVar[tuple[str, ...]] = ("items", "problems")
    __slots__ = FIELDS

    def __init__(self, items: tuple[ItemClaims, ...], problems: tuple[str, ...] = ()) -> None:
        self.items: Final = items
        self.problems: Final = problems

    @property
    def claims(self) -> tuple[Claim, ...]:
        """Every claim, in bundle order then path order."""
        return tuple(claim for item in self.items for claim in item.claims)

    def by_evidence_id(self, evidence_id: str) -> list[Claim]:
        """Claims read from the item(s) with this evidence id."""
        return [claim for item in self.items if item.evidence_id == evidence_id for claim in item.claims]

    def by_kind(self, kind: str) -> list[Claim]:
        """Claims of one kind (``numeric``, ``boolean``, ``text_assertion``, ``timestamp``)."""
        return [claim for claim in self.claims if claim.kind == kind]

    def __iter__(self) -> Iterator[Claim]:
        return iter(self.claims)

    def __len__(self) -> int:
        return sum(len(item.claims) for item in self.items)


class _ItemExtraction:
    """Mutable accumulator for one item (kept private; the result is an immutable ItemClaims)."""

    def __init__(self, item: ItemFields, config: AuditConfig, regex: bool) -> None:
        self.evidence_id: Any = item.evidence_id
        self.requirement_id: Any = item.requirement_id
        self.config = config
        table = _REGEX_CONFIDENCE if regex else _JSON_CONFIDENCE
        self.confidence = table[item.tier]
        self.claims: list[Claim] = []
        self.paths: set[str] = set()
        self.notes: list[str] = []

    def add(self, key: str, path: str, kind: str, value: Any, rank: int) -> None:
        if len(self.claims) >= self.config.max_claims_per_item:
            if "claims_truncated" not in self.notes:
                self.notes.append("claims_truncated")
            return
        try:
            claim_id = make_claim_id(self.evidence_id, path, value)
        except ValueError:  # CanonicalizationError, UnicodeEncodeError, or an int beyond the digit limit
            self.notes.append(f"unencodable:{key}")
            return
        self.paths.add(path)
        self.claims.append(
            Claim(
                claim_id,
                kind,
                key,
                path,
                value,
                self.evidence_id,
                self.requirement_id,
                self.confidence,
                rank,
            )
        )

    def add_json(self, key: str, path: str, raw: Any, rank: int) -> None:
        leaf = path.rsplit(".", 1)[-1]
        if raw is None:
            self.notes.append(f"null_field:{key}")
        elif isinstance(raw, (dict, list)):
            self.notes.append(f"structured_field:{key}")
        elif isinstance(raw, bool):
            self.add(key, path, "boolean", raw, rank)
        elif isinstance(raw, (int, float)):
            if not is_finite_number(raw):
                self.notes.append(f"non_finite:{key}")
            elif is_time_name(leaf) and (moment := parse_time(raw)) is not None:
                self.add(key, path, "timestamp", format_time(moment), rank)
            else:
                self.add(key, path, "numeric", raw, rank)
        elif isinstance(raw, str):
            self._add_text(key, path, raw, rank, leaf)
        else:
            self.notes.append(f"unsupported_type:{key}")

    def _add_text(self, key: str, path: str, raw: str, rank: int, leaf: str) -> None:
        del leaf  # an ISO-8601 string with an offset is a time whatever its field is called
        if (moment := parse_time(raw)) is not None:
            self.add(key, path, "timestamp", format_time(moment), rank)
        elif (number := parse_plain_number(raw)) is not None:
            self.add(key, path, "numeric", number, rank)
        elif raw.strip().lower() in ("true", "false"):
            self.add(key, path, "boolean", raw.strip().lower() == "true", rank)
        elif len(raw) > self.config.max_capture_chars:
            self.notes.append(f"too_long:{key}")
        else:
            self.add(key, path, "text_assertion", raw, rank)

    def add_capture(self, pattern: Pattern, capture: str, rank: int) -> None:
        key, path, text = pattern.name, f"regex:{pattern.name}", capture.strip()
        if len(text) > self.config.max_capture_chars:
            self.notes.append(f"too_long:{key}")
            return
        kind = pattern.kind
        if kind is None:
            quantity = parse_quantity(text)
            if quantity is not None:
                self.add(key, path, "numeric", quantity.value, rank)
            else:
                self._add_text(key, path, text, rank, key)
        elif kind == "numeric":
            quantity = parse_quantity(text)
            self._add_or_note(key, path, kind, quantity.value if quantity else None, rank)
        elif kind == "boolean":
            lowered = text.lower()
            flag = True if lowered in _TRUE_WORDS else False if lowered in _FALSE_WORDS else None
            self._add_or_note(key, path, kind, flag, rank)
        elif kind == "timestamp":
            moment = parse_time(text)
            self._add_or_note(key, path, kind, format_time(moment) if moment else None, rank)
        else:
            self.add(key, path, "text_assertion", text, rank)

    def _add_or_note(self, key: str, path: str, kind: str, value: Any, rank: int) -> None:
        if value is None:
            self.notes.append(f"unparseable:{key}")
        else:
            self.add(key, path, kind, value, rank)


def _by_rank(claims: list[Claim]) -> list[Claim]:
    """``sorted(claims, key=rank)`` (stable); one claim or none is already in order."""
    return list(claims) if len(claims) <= 1 else sorted(claims, key=lambda claim: claim.rank)


def _sorted_walk(document: Any, prefix: str, depth: int) -> list[tuple[str, str, Any]]:
    """``(path, key, value)`` for every dict entry, keys in sorted order, depth-first, bounded depth."""
    found: list[tuple[str, str, Any]] = []
    if depth > 0 and isinstance(document, dict):
        _walk_into(document, prefix, depth, found)
    return found


def _walk_into(document: dict[str, Any], prefix: str, depth: int, found: list[tuple[str, str, Any]]) -> None:
    """:func:`_sorted_walk` into ``found`` (one list, not a generator per nesting level)."""
    for key in sorted(document):
        value = document[key]
        path = f"{prefix}.{key}"
        found.append((path, key, value))
        if depth > 1 and isinstance(value, dict):
            _walk_into(value, path, depth - 1, found)


class ClaimExtractor:
    """Extract claims from every evidence item of a bundle, in bundle order."""

    def __init__(self, config: AuditConfig | None = None) -> None:
        self.config = config or AuditConfig()

    def extract(self, prompt_spec: PromptSpec, evidence: EvidenceBundle) -> ClaimSet:
        """Return the :class:`ClaimSet` of ``evidence`` under the declarations of ``prompt_spec``."""
        requirements = {req.requirement_id: req for req in prompt_spec.data_requirements}
        specs: dict[str, ExtractionSpec] = {}
        problems: list[str] = []
        items: list[ItemClaims] = []
        for index, model in enumerate(evidence.items):
            item = item_fields(model)  # each model field is read once: a Pydantic attribute read is not cheap
            requirement_id = item.requirement_id
            spec = specs.get(requirement_id)
            if spec is None:
                requirement: DataRequirement | None = requirements.get(requirement_id)
                spec = extraction_spec(
                    prompt_spec, requirement, requirement_id, self.config.max_pattern_chars
                )
                specs[requirement_id] = spec
                problems.extend(problem for problem in spec.problems if problem not in problems)
            items.append(self._extract_item(index, item, spec))
        return ClaimSet(items=tuple(items), problems=tuple(problems))

    def _extract_item(self, index: int, item: ItemFields, spec: ExtractionSpec) -> ItemClaims:
        content_type = item.content_type.lower()
        if not item.valid:
            return self._finish(
                index, item, "skipped", None, _ItemExtraction(item, self.config, False), ["fetch_failed"]
            )
        is_json = "json" in content_type or isinstance(item.parsed_value, (dict, list))
        if is_json:
            work = _ItemExtraction(item, self.config, False)
            method, value_key = self._extract_json(item, spec, work)
            return self._finish(index, item, method, value_key, work, [])
        work = _ItemExtraction(item, self.config, True)
        if "html" in content_type or content_type.startswith("text") or isinstance(item.raw_content, str):
            value_key = self._extract_text(item, spec, work)
            return self._finish(index, item, "regex", value_key, work, [])
        return self._finish(index, item, "none", None, work, [f"unsupported_content_type:{content_type}"])

    def _extract_json(
        self, item: ItemFields, spec: ExtractionSpec, work: _ItemExtraction
    ) -> tuple[str, str | None]:
        parsed = item.parsed_value
        if parsed is None and isinstance(item.raw_content, str):
            if len(item.raw_content) > self.config.max_text_chars:
                work.notes.append("raw_content_too_large")
            else:
                try:
                    parsed = loads_strict(item.raw_content)
                except StrictJSONError:
                    work.notes.append("raw_content_not_json")
        containers = (("extracted_fields", item.extracted_fields), ("parsed_value", parsed))
        if spec.fields is not None:
            for rank, field in enumerate(spec.fields):
                if not self._read_field(field, (field, *spec.aliases.get(field, ())), containers, rank, work):
                    work.notes.append(f"missing_field:{field}")
            value_key = spec.value_field or next((f for f in spec.fields if not is_time_name(f)), None)
            method = "json_fields"
        else:
            nested: dict[str, tuple[str, Any]] | None = None
            for rank, name in enumerate(DEFAULT_FIELDS):
                if self._read_field(name, (name,), containers, rank, work):
                    continue
                if nested is None:
                    nested = self._nested_defaults(parsed)
                if name in nested:
                    work.add_json(name, *nested[name], rank)
            keys = [claim.key for claim in _by_rank(work.claims) if claim.kind != "timestamp"]
            value_key = spec.value_field or (keys[0] if keys else None)
            method = "json_default_fields"
        self._scan_times(containers, work)
        return method, value_key

    @staticmethod
    def _read_field(
        key: str,
        paths: tuple[str, ...],
        containers: tuple[tuple[str, Any], ...],
        rank: int,
        work: _ItemExtraction,
    ) -> bool:
        for container_name, document in containers:
            for path in paths:
                raw = lookup(document, split_path(path))
                if raw is not MISSING:
                    work.add_json(key, f"{container_name}.{path}", raw, rank)
                    return True
        return False

    def _nested_defaults(self, parsed: Any) -> dict[str, tuple[str, Any]]:
        """First ``(path, value)`` of each default field inside ``parsed_value``, in sorted key order."""
        found: dict[str, tuple[str, Any]] = {}
        for path, key, value in _sorted_walk(parsed, "parsed_value", self.config.max_search_depth):
            if (
                key in _DEFAULT_SET
                and key not in found
                and value is not None
                and not isinstance(value, (dict, list))
            ):
                found[key] = (path, value)
        return found

    def _scan_times(self, containers: tuple[tuple[str, Any], ...], work: _ItemExtraction) -> None:
        for container_name, document in containers:
            for path, key, value in _sorted_walk(document, container_name, self.config.max_search_depth):
                if path in work.paths or isinstance(value, (dict, list, bool)):
                    continue
                if not is_time_name(key) and not isinstance(value, str):
                    continue
                moment = parse_time(value)
                if moment is not None:
                    work.add(key, path, "timestamp", format_time(moment), _AUTO_RANK)

    def _extract_text(self, item: ItemFields, spec: ExtractionSpec, work: _ItemExtraction) -> str | None:
        text = item.raw_content if isinstance(item.raw_content, str) else item.parsed_value
        if not isinstance(text, str):
            work.notes.append("no_text_content")
            return None
        if len(text) > self.config.max_text_chars:
            text = text[: self.config.max_text_chars]
            work.notes.append("text_truncated")
        if not spec.patterns:
            work.notes.append("no_extraction_patterns")
        for rank, pattern in enumerate(spec.patterns):
            match = pattern.regex.search(text)
            if match is None:
                work.notes.append(f"no_match:{pattern.name}")
                continue
            if "value" in pattern.regex.groupindex:
                capture = match.group("value")
            else:
                capture = match.group(1) if pattern.regex.groups else match.group(0)
            if capture is None:
                work.notes.append(f"no_match:{pattern.name}")
                continue
            work.add_capture(pattern, capture, rank)
        if spec.value_field is not None:
            return spec.value_field
        keys = [claim.key for claim in _by_rank(work.claims) if claim.kind != "timestamp"]
        return keys[0] if keys else None

    @staticmethod
    def _observation(item: ItemFields, claims: list[Claim]) -> tuple[datetime | None, str | None]:
        times = [claim for claim in claims if claim.kind == "timestamp"]
        if times:

            def preference(claim: Claim) -> tuple[int, int, int, str]:
                container = 0 if claim.path.startswith("extracted_fields") else 1
                name = claim.key.lower()
                named = _TIME_PREFERENCE.index(name) if name in _TIME_PREFERENCE else len(_TIME_PREFERENCE)
                return claim.rank, container, named, claim.path

            best = times[0] if len(times) == 1 else min(times, key=preference)
            return parse_time(best.value), f"claim:{best.claim_id}"
        if item.fetched_at is not None:
            return item.fetched_at, "provenance.fetched_at"
        return None, None

    def _finish(
        self,
        index: int,
        item: ItemFields,
        method: str,
        value_key: str | None,
        work: _ItemExtraction,
        notes: list[str],
    ) -> ItemClaims:
        observed_at, observed_from = self._observation(item, work.claims)
        return ItemClaims(
            index=index,
            evidence_id=item.evidence_id,
            requirement_id=item.requirement_id,
            method=method,
            claims=tuple(work.claims)
            if len(work.claims) <= 1
            else tuple(sorted(work.claims, key=lambda claim: (claim.path, claim.key))),
            value_key=value_key,
            observed_at=observed_at,
            observed_from=observed_from,
            notes=tuple(notes + work.notes),
        )
