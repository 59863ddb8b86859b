"""The versioned envelope carried on the ``evidence-bundles`` topic, and its strict decoder.

A record's value is UTF-8 JSON::

    {"schema_id": "cournot-ledger/evidence-envelope", "schema_version": 1,
     "event_id": "optional producer id", "prompt_spec": {...}, "evidence_bundle": {...},
     "options": {"verify_reasoning": false}}

and its key is the market id. Version 2 is version 1 plus two optional reasoning options
(``options.reasoning_query`` and ``options.reasoning_expression``: the task the reasoning stage
verifies); version 1 still refuses them, and a v1 record decodes exactly as before. The
idempotency key never depends on the version or the options.

:func:`decode_envelope` turns raw bytes into a validated :class:`DecodedEnvelope` or raises
:class:`EnvelopeError` with a reason code (:class:`Reason`), a message and a JSON path. It is the
one decoder: the consumer uses it on record values; ``ledger publish``, ``ledger audit``, replay
and the reasoning stage reach it through :mod:`engine.envelope_inputs`. The published JSON Schemas
(``schemas/envelope-v1.schema.json``, ``schemas/envelope-v2.schema.json``) are generated from
:class:`EnvelopeV1` / :class:`EnvelopeV2` by :func:`envelope_json_schema`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, ValidationError

from engine.canonical import CanonicalizationError, canonical_bytes, hash_canonical, to_hex
from engine.carried_inputs import InputsCanonical, inputs_preimage
from engine.commitments import ItemCanonical, bundle_canonical
from engine.jsonio import DEFAULT_MAX_DEPTH, StrictJSONError, loads_strict
from engine.limits import (
    MAX_EVENT_ID_BYTES,
    MAX_ID_BYTES,
    MAX_INTEGER_DIGITS,
    StoreProblem,
    find_unstorable_text,
    id_too_long,
    may_hold_unstorable_text,
)
from engine.schemas import EvidenceBundle, PromptSpec, StrictModel

__all__ = [
    "ENVELOPE_SCHEMA_ID",
    "ENVELOPE_SCHEMA_VERSION",
    "LATEST_ENVELOPE_VERSION",
    "MAX_REASONING_EXPRESSION_LENGTH",
    "MAX_REASONING_QUERY_LENGTH",
    "SUPPORTED_VERSIONS",
    "DecodedEnvelope",
    "Envelope",
    "EnvelopeError",
    "EnvelopeOptions",
    "EnvelopeOptionsV2",
    "EnvelopeV1",
    "EnvelopeV2",
    "Reason",
    "decode_envelope",
    "envelope_json_schema",
    "from_strict_json_error",
    "idempotency_key",
    "inputs_hash",
    "inputs_preimage",
    "render_json_schema",
    "validate_envelope",
    "wrap_inputs",
]

ENVELOPE_SCHEMA_ID = "cournot-ledger/evidence-envelope"
ENVELOPE_SCHEMA_VERSION = 1
"""The version :func:`wrap_inputs` writes unless a version-2 option is given."""
LATEST_ENVELOPE_VERSION = 2
SUPPORTED_VERSIONS = frozenset({ENVELOPE_SCHEMA_VERSION, LATEST_ENVELOPE_VERSION})
SCHEMA_URL = "https://cournot.dev/schemas/ledger/envelope-v1.schema.json"
SCHEMA_URLS = {1: SCHEMA_URL, 2: "https://cournot.dev/schemas/ledger/envelope-v2.schema.json"}
MAX_REASONING_QUERY_LENGTH = 4096
MAX_REASONING_EXPRESSION_LENGTH = 512


class Reason(StrEnum):
    """Why a record was refused; the value is the ``ledger.dlq.reason`` header and the ledger code."""

    OVERSIZE = "oversize"
    EMPTY = "empty_value"
    INVALID_UTF8 = "invalid_utf8"
    INVALID_JSON = "invalid_json"
    NON_FINITE_NUMBER = "non_finite_number"
    DUPLICATE_KEY = "duplicate_key"
    TOO_DEEP = "too_deep"
    NUMBER_TOO_LARGE = "number_too_large"
    NUMBER_UNDERFLOW = "number_underflow"
    UNSTORABLE_TEXT = "unstorable_text"
    VALUE_TOO_LONG = "value_too_long"
    NOT_AN_OBJECT = "not_an_object"
    UNKNOWN_SCHEMA = "unknown_envelope_schema"
    UNKNOWN_VERSION = "unknown_envelope_version"
    SCHEMA_VIOLATION = "schema_violation"
    NAIVE_TIMESTAMP = "naive_timestamp"
    DUPLICATE_EVIDENCE_ID = "duplicate_evidence_id"
    MARKET_MISMATCH = "market_mismatch"
    UNKNOWN_REQUIREMENT = "unknown_requirement"
    NOT_CANONICAL = "not_canonicalizable"
    AUDIT_FAILED = "audit_failed"
    LEDGER_REFUSED = "ledger_refused"


_STRICT_JSON_REASONS = {
    "invalid_utf8": Reason.INVALID_UTF8,
    "invalid_json": Reason.INVALID_JSON,
    "non_finite_number": Reason.NON_FINITE_NUMBER,
    "duplicate_key": Reason.DUPLICATE_KEY,
    "too_deep": Reason.TOO_DEEP,
    "number_too_large": Reason.NUMBER_TOO_LARGE,
    "number_underflow": Reason.NUMBER_UNDERFLOW,
}


class EnvelopeError(ValueError):
    """A record that cannot be decoded or validated: ``reason``, ``message`` and JSON ``path``.

    ``problems`` lists every ``(path, message)`` found (several for a schema violation), the first
    one being ``(path, message)``.
    """

    def __init__(
        self, reason: Reason, message: str, path: str = "$", problems: tuple[tuple[str, str], ...] = ()
    ) -> None:
        super().__init__(f"{reason.value}: {message} at {path}")
        self.reason = reason
        self.message = message
        self.path = path
        self.problems = problems or ((path, message),)


class EnvelopeOptions(StrictModel):
    """Processing requests that do not change what is audited."""

    verify_reasoning: bool = Field(
        default=False,
        description="Also queue the trace for LLM cross-validation by the ReasoningVerifier stage.",
    )


class EnvelopeOptionsV2(EnvelopeOptions):
    """Version-2 options: version 1's plus the reasoning task (each optional, bounded, not blank)."""

    reasoning_query: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_REASONING_QUERY_LENGTH,
        pattern=r"\S",
        description="The question the ReasoningVerifier checks the formula against "
        "(default: prompt_spec.market.question).",
    )
    reasoning_expression: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_REASONING_EXPRESSION_LENGTH,
        pattern=r"\S",
        description="The formula the ReasoningVerifier checks: numeric literals and + - * / ** only "
        "(default: '<numeric_value> - <threshold>' from the audit).",
    )


_EVENT_ID_DESCRIPTION = (
    "Producer's unique event id; when set it is the ledger idempotency key, "
    "otherwise the SHA-256 of the canonical prompt_spec and evidence_bundle is."
)


class EnvelopeV1(StrictModel):
    """Version 1 of the evidence-bundle envelope (unknown fields are rejected)."""

    schema_id: Literal["cournot-ledger/evidence-envelope"] = Field(
        description="Identifies this envelope format."
    )
    schema_version: Literal[1] = Field(description="Envelope format version; consumers refuse others.")
    event_id: str | None = Field(
        default=None, min_length=1, max_length=256, description=_EVENT_ID_DESCRIPTION
    )
    prompt_spec: PromptSpec
    evidence_bundle: EvidenceBundle
    options: EnvelopeOptions = Field(default_factory=EnvelopeOptions)


class EnvelopeV2(StrictModel):
    """Version 2: version 1 whose options may also carry the reasoning task (unknown fields are rejected)."""

    schema_id: Literal["cournot-ledger/evidence-envelope"] = Field(
        description="Identifies this envelope format."
    )
    schema_version: Literal[2] = Field(description="Envelope format version; consumers refuse others.")
    event_id: str | None = Field(
        default=None, min_length=1, max_length=256, description=_EVENT_ID_DESCRIPTION
    )
    prompt_spec: PromptSpec
    evidence_bundle: EvidenceBundle
    options: EnvelopeOptionsV2 = Field(default_factory=EnvelopeOptionsV2)


Envelope = EnvelopeV1 | EnvelopeV2
_MODELS: dict[int, type[EnvelopeV1] | type[EnvelopeV2]] = {1: EnvelopeV1, 2: EnvelopeV2}


@dataclass(frozen=True)
class DecodedEnvelope:
    """A validated envelope plus the values the consumer needs from it.

    ``prompt_spec_canonical`` and ``evidence_bundle_canonical`` are the canonical bytes the inputs
    hash was computed over (its preimage is ``{"evidence_bundle":<bundle>,"prompt_spec":<spec>}``),
    kept so the ledger need not canonicalise the inputs again; empty when not computed.
    ``evidence_items_canonical``: each evidence item's canonical bytes, made from the same dump,
    bound to this envelope's item objects (for ``run_pipeline``'s ``evidence_root``); None when not made.
    ``inputs_canonical``: the inputs hash bound to the spec and bundle objects and the very bytes above
    it was computed from, so the ledger's draft need not hash the pair again to trust those bytes
    (:class:`~engine.carried_inputs.InputsCanonical`); None when not made.
    """

    envelope: Envelope
    idempotency_key: str
    inputs_hash: str
    prompt_spec_canonical: bytes = b""
    evidence_bundle_canonical: bytes = b""
    evidence_items_canonical: ItemCanonical | None = None
    inputs_canonical: InputsCanonical | None = None

    @property
    def market_id(self) -> str:
        """The prompt spec's market id (equal to the bundle's, checked at decode)."""
        return self.envelope.prompt_spec.market.market_id


def wrap_inputs(
    prompt_spec: Any,
    evidence_bundle: Any,
    *,
    event_id: str | None = None,
    verify_reasoning: bool = False,
    reasoning_query: str | None = None,
    reasoning_expression: str | None = None,
) -> dict[str, Any]:
    """An envelope document around raw ``prompt_spec`` and ``evidence_bundle`` JSON values:
    version 1, or version 2 when ``reasoning_query`` or ``reasoning_expression`` is given."""
    reasoning = {
        name: value
        for name, value in (
            ("reasoning_query", reasoning_query),
            ("reasoning_expression", reasoning_expression),
        )
        if value is not None
    }
    version = LATEST_ENVELOPE_VERSION if reasoning else ENVELOPE_SCHEMA_VERSION
    document: dict[str, Any] = {"schema_id": ENVELOPE_SCHEMA_ID, "schema_version": version}
    if event_id is not None:
        document["event_id"] = event_id
    document["prompt_spec"] = prompt_spec
    document["evidence_bundle"] = evidence_bundle
    document["options"] = {"verify_reasoning": verify_reasoning, **reasoning}
    return document


def inputs_hash(envelope: Envelope) -> str:
    """``0x`` + SHA-256 of the canonical ``{"prompt_spec", "evidence_bundle"}`` pair."""
    pair = {"prompt_spec": envelope.prompt_spec, "evidence_bundle": envelope.evidence_bundle}
    return to_hex(hash_canonical(pair))


def _canonical_inputs(envelope: Envelope) -> tuple[InputsCanonical, ItemCanonical | None]:
    """The inputs hash with the prompt spec's and the evidence bundle's canonical bytes it was computed
    from (:class:`~engine.carried_inputs.InputsCanonical`), and the items' bytes, each member
    canonicalised once (the items' bytes come from the bundle's dump, see
    :func:`engine.commitments.bundle_canonical`).

    A member that cannot be canonicalised is re-run through :func:`inputs_hash`, so the error (and
    its JSON path) is the one the pair gives.
    """
    try:
        spec = canonical_bytes(envelope.prompt_spec)
        bundle, items = bundle_canonical(envelope.evidence_bundle)
    except CanonicalizationError:
        inputs_hash(envelope)
        raise
    return InputsCanonical(envelope.prompt_spec, envelope.evidence_bundle, spec, bundle), items


def idempotency_key(envelope: Envelope, digest: str | None = None) -> str:
    """``event:<event_id>`` when the producer gave one, else ``inputs:<inputs hash>``."""
    if envelope.event_id is not None:
        return f"event:{envelope.event_id}"
    return f"inputs:{digest or inputs_hash(envelope)}"


def json_path(location: tuple[int | str, ...]) -> str:
    """A pydantic error location as a JSON path: ``("items", 2, "id")`` -> ``$.items[2].id``."""
    path = "$"
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.isidentifier():
            path += f".{part}"
        else:
            path += f"[{json.dumps(part, ensure_ascii=False)}]"
    return path


def from_strict_json_error(exc: StrictJSONError) -> EnvelopeError:
    """The envelope refusal for a strict JSON decoding error (same code, message and path)."""
    return EnvelopeError(_STRICT_JSON_REASONS.get(exc.code, Reason.INVALID_JSON), exc.message, exc.path)


def _from_validation_error(exc: ValidationError) -> EnvelopeError:
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    path = json_path(tuple(first["loc"]))
    message = first["msg"]
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})"
    problems = tuple((json_path(tuple(error["loc"])), str(error["msg"])) for error in errors)
    if first["type"] == "value_error" and "has no time zone" in first["msg"]:
        return EnvelopeError(Reason.NAIVE_TIMESTAMP, message, path, problems)
    return EnvelopeError(Reason.SCHEMA_VIOLATION, message, path, problems)


def _check_version(document: Any) -> None:
    if not isinstance(document, dict):
        raise EnvelopeError(
            Reason.NOT_AN_OBJECT, f"envelope must be a JSON object, got {type(document).__name__}"
        )
    schema_id = document.get("schema_id")
    if schema_id != ENVELOPE_SCHEMA_ID:
        raise EnvelopeError(
            Reason.UNKNOWN_SCHEMA,
            f"schema_id must be {ENVELOPE_SCHEMA_ID!r}, got {schema_id!r}",
            "$.schema_id",
        )
    version = document.get("schema_version")
    if isinstance(version, bool | list | dict) or version not in SUPPORTED_VERSIONS:  # list/dict: unhashable
        supported = ", ".join(str(v) for v in sorted(SUPPORTED_VERSIONS))
        raise EnvelopeError(
            Reason.UNKNOWN_VERSION,
            f"envelope schema_version {version!r} is not supported (supported: {supported})",
            "$.schema_version",
        )


def check_consistency(envelope: Envelope) -> None:
    """Cross-field rules the JSON Schema cannot express: market ids, evidence ids, requirement ids."""
    spec, bundle = envelope.prompt_spec, envelope.evidence_bundle
    if bundle.market_id != spec.market.market_id:
        raise EnvelopeError(
            Reason.MARKET_MISMATCH,
            f"evidence_bundle.market_id {bundle.market_id!r} differs from prompt_spec.market.market_id "
            f"{spec.market.market_id!r}",
            "$.evidence_bundle.market_id",
        )
    seen: set[str] = set()
    requirement_ids = {requirement.requirement_id for requirement in spec.data_requirements}
    for index, item in enumerate(bundle.items):
        if item.evidence_id in seen:
            raise EnvelopeError(
                Reason.DUPLICATE_EVIDENCE_ID,
                f"evidence_id {item.evidence_id!r} occurs more than once",
                f"$.evidence_bundle.items[{index}].evidence_id",
            )
        seen.add(item.evidence_id)
        if item.requirement_id not in requirement_ids:
            raise EnvelopeError(
                Reason.UNKNOWN_REQUIREMENT,
                f"requirement_id {item.requirement_id!r} is not a data requirement of the prompt spec",
                f"$.evidence_bundle.items[{index}].requirement_id",
            )


_STORE_REASONS = {"unstorable_text": Reason.UNSTORABLE_TEXT, "value_too_long": Reason.VALUE_TOO_LONG}


def _store_refusal(problem: StoreProblem) -> EnvelopeError:
    # an unknown code still refuses the record (a ValueError here would be a poison pill)
    return EnvelopeError(
        _STORE_REASONS.get(problem.code, Reason.SCHEMA_VIOLATION), problem.message, problem.path
    )


def check_storable_text(raw: bytes | None, document: Any) -> None:
    """Refuse U+0000 or a lone surrogate in any key or string (``unstorable_text`` at its path)."""
    if raw is not None and not may_hold_unstorable_text(raw):
        return
    problem = find_unstorable_text(document)
    if problem is not None:
        raise _store_refusal(problem)


def check_storable_ids(envelope: Envelope) -> None:
    """Refuse ids longer than their key or indexed column holds (``value_too_long`` at their path)."""
    checks = [
        (envelope.prompt_spec.market.market_id, "$.prompt_spec.market.market_id", MAX_ID_BYTES),
        (envelope.evidence_bundle.market_id, "$.evidence_bundle.market_id", MAX_ID_BYTES),
        (envelope.evidence_bundle.bundle_id, "$.evidence_bundle.bundle_id", MAX_ID_BYTES),
    ]
    if envelope.event_id is not None:
        checks.append((envelope.event_id, "$.event_id", MAX_EVENT_ID_BYTES))
    for value, path, limit in checks:
        problem = id_too_long(value, path, limit)
        if problem is not None:
            raise _store_refusal(problem)


def validate_envelope(document: Any, raw: bytes | None = None) -> DecodedEnvelope:
    """Everything :func:`decode_envelope` checks after the JSON decoding, on a decoded document.

    ``raw`` (the bytes the document came from) only lets the text check skip its walk when the
    bytes cannot hold U+0000 or a lone surrogate; without it the whole document is walked.
    """
    _check_version(document)
    check_storable_text(raw, document)
    try:
        envelope = _MODELS[document["schema_version"]].model_validate(document)
    except ValidationError as exc:
        raise _from_validation_error(exc) from exc
    check_storable_ids(envelope)
    check_consistency(envelope)
    try:
        inputs, items = _canonical_inputs(envelope)
    except CanonicalizationError as exc:
        raise EnvelopeError(Reason.NOT_CANONICAL, exc.reason, exc.path) from exc
    digest = inputs.inputs_hash
    return DecodedEnvelope(
        envelope,
        idempotency_key(envelope, digest),
        digest,
        inputs.prompt_spec_canonical,
        inputs.evidence_bundle_canonical,
        items,
        inputs,
    )


def decode_envelope(
    raw: bytes | None, *, max_bytes: int = 1_048_576, max_depth: int = DEFAULT_MAX_DEPTH
) -> DecodedEnvelope:
    """Decode and validate one record value; raise :class:`EnvelopeError` saying why not."""
    if not raw:
        raise EnvelopeError(Reason.EMPTY, "record value is empty (tombstone or missing)")
    if len(raw) > max_bytes:
        raise EnvelopeError(Reason.OVERSIZE, f"record value is {len(raw)} bytes, the limit is {max_bytes}")
    try:
        document = loads_strict(
            raw, max_depth=max_depth, max_integer_digits=MAX_INTEGER_DIGITS, exact_numbers=True
        )
    except StrictJSONError as exc:
        raise EnvelopeError(
            _STRICT_JSON_REASONS.get(exc.code, Reason.INVALID_JSON), exc.message, exc.path
        ) from exc
    return validate_envelope(document, raw)


def envelope_json_schema(version: int = ENVELOPE_SCHEMA_VERSION) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of envelope ``version``, as published in ``schemas/``."""
    schema = _MODELS[version].model_json_schema(mode="validation")
    header = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_URLS[version],
        "title": f"Cournot ledger evidence envelope, version {version}",
        "description": (
            "Value of a record on the evidence-bundles topic (key: the market id). Consumers also "
            "refuse: values over the size limit, invalid UTF-8, NaN/Infinity, numbers a 64-bit float "
            "cannot hold (1e400, 1e-400), integers over 308 digits, duplicate object keys, nesting "
            "deeper than 64, U+0000 or lone surrogates in any string or key, market_id and bundle_id "
            "over 512 bytes of UTF-8, timestamps without a time zone, duplicate evidence ids, "
            "evidence_bundle.market_id different from prompt_spec.market.market_id, and evidence "
            "whose requirement_id is not one of prompt_spec.data_requirements."
        ),
    }
    schema.pop("title", None)
    schema.pop("description", None)
    return header | schema


def render_json_schema(version: int = ENVELOPE_SCHEMA_VERSION) -> str:
    """The published schema file's exact text (sorted keys, two-space indent, final newline)."""
    return json.dumps(envelope_json_schema(version), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":  # python -m engine.envelope [2] > schemas/envelope-v<version>.schema.json
    import sys

    print(render_json_schema(int(sys.argv[1]) if len(sys.argv) > 1 else ENVELOPE_SCHEMA_VERSION), end="")
