"""The PoR-pack envelope (a second record type on the same topic), its decoder and the ledger draft.

A record's value is UTF-8 JSON, either with the pack as one document::

    {"schema_id": "cournot-ledger/por-envelope", "schema_version": 1, "event_id": "optional",
     "pack": {"prompt_spec": {...}, "evidence_bundle": {...}, "reasoning_trace": {...},
              "verdict": {...}, "por_bundle": {...}, "tool_plan": {...}}}

or with the pack's files byte for byte (so the manifest hashes can be checked)::

    {"schema_id": "cournot-ledger/por-envelope", "schema_version": 1,
     "files": {"manifest.json": "<base64>", "prompt_spec.json": "<base64>", ...}}

The consumer verifies the pack (:mod:`engine.por_pack`) and appends one ``por.verified`` entry
(status ``por_verified``) holding the pack as received and the full report. A record that is not a
valid envelope, or whose pack parts are missing or do not parse, is refused exactly like a bad
evidence bundle: dead-letter copy plus ``submission.rejected``. A pack that parses but fails its
hashes is *recorded* (status ``failed`` in the report): that finding is the product.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from consumers.por_route import POR_ENVELOPE_SCHEMA_ID, is_por_record
from engine.canonical import CanonicalizationError, hash_canonical, to_hex
from engine.envelope import EnvelopeError, Reason, from_strict_json_error, json_path
from engine.jsonio import DEFAULT_MAX_DEPTH, StrictJSONError, loads_strict
from engine.limits import (
    MAX_ID_BYTES,
    MAX_INTEGER_DIGITS,
    StoreProblem,
    find_unstorable_text,
    id_too_long,
    may_hold_unstorable_text,
)
from engine.por_pack import PackParts, verify_parts
from engine.por_pack.models import PackManifest
from engine.por_pack.parts import MANIFEST_PATH, PART_MODELS
from engine.por_pack.stored import StoredPackError, make_stored_pack, parts_from_stored
from engine.schemas import PoRBundle, StrictModel
from engine.version import ENGINE_VERSION
from ledger.store.records import EntryDraft, OperationalInfo, SubmissionDraft

__all__ = [
    "POR_ENVELOPE_SCHEMA_ID",
    "POR_ENVELOPE_SCHEMA_VERSION",
    "DecodedPoREnvelope",
    "PoREnvelopeV1",
    "decode_por_envelope",
    "is_por_record",
    "por_draft",
    "por_envelope_json_schema",
    "render_por_json_schema",
]

POR_ENVELOPE_SCHEMA_VERSION = 1
SCHEMA_URL = "https://cournot.dev/schemas/ledger/por-envelope-v1.schema.json"


class PoREnvelopeV1(StrictModel):
    """Version 1 of the PoR-pack envelope: exactly one of ``pack`` and ``files``."""

    schema_id: Literal["cournot-ledger/por-envelope"] = Field(description="Identifies this envelope format.")
    schema_version: Literal[1] = Field(description="Envelope format version; consumers refuse others.")
    event_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="Producer's unique event id; when set it is the ledger idempotency key, "
        "otherwise the SHA-256 of the canonical pack is.",
    )
    pack: dict[str, Any] | None = Field(
        default=None, description="The pack as one object keyed by part (prompt_spec, evidence_bundle, ...)."
    )
    files: dict[str, str] | None = Field(
        default=None, description="The pack's files: path inside the pack -> standard base64 of its bytes."
    )

    @model_validator(mode="after")
    def _one_form(self) -> PoREnvelopeV1:
        if (self.pack is None) == (self.files is None):
            raise ValueError("exactly one of pack and files is required")
        return self


@dataclass(frozen=True)
class DecodedPoREnvelope:
    """A valid envelope, the pack it carries (parsed), and its idempotency key."""

    envelope: PoREnvelopeV1
    parts: PackParts
    pack_hash: str
    idempotency_key: str


def _stored_pack(envelope: PoREnvelopeV1) -> dict[str, Any]:
    return make_stored_pack(envelope.pack, envelope.files)


def _parts(stored: dict[str, Any], source: str) -> PackParts:
    try:
        return parts_from_stored(stored, source)
    except StoredPackError as exc:
        raise EnvelopeError(Reason.SCHEMA_VIOLATION, exc.message, exc.path) from exc


def _first_error(parts: PackParts, key: str) -> tuple[str, bool] | None:
    """The JSON path inside part ``key`` of its first validation error, and whether it is a naive timestamp."""
    value: Any
    model: type[BaseModel]
    if key == "manifest":
        data = parts.files.get(MANIFEST_PATH)
        value, model = (loads_strict(data) if data is not None else None), PackManifest
    elif key in PART_MODELS:
        value, model = parts.raw.get(key), PART_MODELS[key]
    else:
        return None
    try:
        model.model_validate(value)
    except (ValidationError, StrictJSONError) as exc:
        if not isinstance(exc, ValidationError):
            return None
        first = exc.errors(include_url=False, include_input=False)[0]
        naive = first["type"] == "value_error" and "has no time zone" in first["msg"]
        return json_path(tuple(first["loc"]))[1:], naive
    return None


def _parse_refusal(parts: PackParts, stored: dict[str, Any]) -> EnvelopeError | None:
    for check in parts.checks:
        if check.check_id.startswith("parse.") or check.check_id == "manifest.present":
            where = check.file or "$"
            prefix = "$.pack" if stored["form"] == "document" else "$.files"
            path = prefix + where[1:] if where.startswith("$") else f"{prefix}[{json.dumps(where)}]"
            reason = Reason.SCHEMA_VIOLATION
            found = _first_error(parts, check.check_id.removeprefix("parse."))
            if found is not None:
                path += found[0]
                reason = Reason.NAIVE_TIMESTAMP if found[1] else reason
            return EnvelopeError(reason, check.message, path)
    return None


_STORE_REASONS = {"unstorable_text": Reason.UNSTORABLE_TEXT, "value_too_long": Reason.VALUE_TOO_LONG}


def _refuse_store_problem(problem: StoreProblem | None, prefix: str) -> None:
    """Raise the refusal for a value the store cannot hold; ``prefix`` replaces the path's ``$``."""
    if problem is None:
        return
    # an unknown code still refuses the record (anything else here would be a poison pill)
    reason = _STORE_REASONS.get(problem.code, Reason.SCHEMA_VIOLATION)
    raise EnvelopeError(reason, problem.message, prefix + problem.path[1:])


def _file_path(name: str) -> str:
    return f"$.files[{json.dumps(name)}]"


def _check_parsed_files(parts: PackParts) -> None:
    """Hold every file the verifier parses to the store's limits, as the envelope itself is held.

    Their values reach the report (and its ``market_id`` column), so a 400-digit integer, ``1e400``,
    U+0000 or a lone surrogate in a file is refused with its specific reason code and path.
    """
    for name in sorted({MANIFEST_PATH, *parts.paths.values()}):
        data = parts.files.get(name)
        if data is None:
            continue
        prefix = _file_path(name)
        try:
            value = loads_strict(data, max_integer_digits=MAX_INTEGER_DIGITS, exact_numbers=True)
        except StrictJSONError as exc:
            refused = from_strict_json_error(exc)
            raise EnvelopeError(refused.reason, f"{name}: {refused.message}", prefix + exc.path[1:]) from exc
        if may_hold_unstorable_text(data):
            _refuse_store_problem(find_unstorable_text(value), prefix)


def _check_stored_ids(parts: PackParts, stored: dict[str, Any]) -> None:
    """Refuse a market or bundle id longer than its indexed column holds (``value_too_long``)."""
    files_form = stored["form"] == "files"
    por = parts.model("por_bundle", PoRBundle)
    if por is not None:
        where = _file_path(parts.paths["por_bundle"]) if files_form else "$.pack.por_bundle"
        _refuse_store_problem(id_too_long(por.market_id, "$.market_id"), where)
    evidence = parts.raw.get("evidence_bundle")
    bundle_id = evidence.get("bundle_id") if isinstance(evidence, dict) else None
    if isinstance(bundle_id, str):
        where = _file_path(parts.paths["evidence_bundle"]) if files_form else "$.pack.evidence_bundle"
        _refuse_store_problem(id_too_long(bundle_id, "$.bundle_id", MAX_ID_BYTES), where)


def decode_por_envelope(
    raw: bytes | None, *, max_bytes: int = 1_048_576, max_depth: int = DEFAULT_MAX_DEPTH
) -> DecodedPoREnvelope | None:
    """Decode a PoR envelope and parse its pack; raise :class:`EnvelopeError` saying why not.

    Returns None when the value is a JSON object whose ``schema_id`` is not the PoR envelope's (the
    marker only appeared inside it): the caller then treats it as an evidence-bundle envelope.
    """
    if not raw:
        raise EnvelopeError(Reason.EMPTY, "record value is empty (tombstone or missing)")
    if len(raw) > max_bytes:
        raise EnvelopeError(Reason.OVERSIZE, f"record value is {len(raw)} bytes, the limit is {max_bytes}")
    try:
        document = loads_strict(
            raw, max_depth=max_depth, max_integer_digits=MAX_INTEGER_DIGITS, exact_numbers=True
        )
    except StrictJSONError as exc:
        raise from_strict_json_error(exc) from exc
    if not isinstance(document, dict):
        raise EnvelopeError(Reason.NOT_AN_OBJECT, "envelope must be a JSON object")
    if document.get("schema_id") != POR_ENVELOPE_SCHEMA_ID:
        return None
    if may_hold_unstorable_text(raw):
        _refuse_store_problem(find_unstorable_text(document), "$")
    version = document.get("schema_version")
    if isinstance(version, bool) or version != POR_ENVELOPE_SCHEMA_VERSION:
        raise EnvelopeError(
            Reason.UNKNOWN_VERSION,
            f"PoR envelope schema_version {version!r} is not supported (supported: 1)",
            "$.schema_version",
        )
    try:
        envelope = PoREnvelopeV1.model_validate(document)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        raise EnvelopeError(Reason.SCHEMA_VIOLATION, first["msg"], json_path(tuple(first["loc"]))) from exc
    stored = _stored_pack(envelope)
    try:
        pack_hash = to_hex(hash_canonical(stored))
    except CanonicalizationError as exc:
        raise EnvelopeError(Reason.NOT_CANONICAL, exc.reason, exc.path) from exc
    key = f"event:{envelope.event_id}" if envelope.event_id is not None else f"por:{pack_hash}"
    parts = _parts(stored, key)
    _check_parsed_files(parts)
    refusal = _parse_refusal(parts, stored)
    if refusal is not None:
        raise refusal
    _check_stored_ids(parts, stored)
    return DecodedPoREnvelope(envelope, parts, pack_hash, key)


def por_draft(decoded: DecodedPoREnvelope, operational: OperationalInfo | None) -> SubmissionDraft:
    """Verify the pack and build the ``por_verified`` submission with its ``por.verified`` entry."""
    report = verify_parts(decoded.parts)
    stored = _stored_pack(decoded.envelope)
    evidence = decoded.parts.raw.get("evidence_bundle")
    bundle_id = evidence.get("bundle_id") if isinstance(evidence, dict) else None
    payload = {
        "envelope": {"schema_id": POR_ENVELOPE_SCHEMA_ID, "schema_version": POR_ENVELOPE_SCHEMA_VERSION},
        "event_id": decoded.envelope.event_id,
        "pack_hash": decoded.pack_hash,
        "stored_pack": stored,
        "report": report.model_dump(mode="json"),
        "report_hash": to_hex(hash_canonical(report.model_dump(mode="json"))),
    }
    return SubmissionDraft(
        idempotency_key=decoded.idempotency_key,
        market_id=report.market_id,
        bundle_id=bundle_id if isinstance(bundle_id, str) and bundle_id else None,
        input_hashes={"pack_hash": decoded.pack_hash},
        status="por_verified",
        entries=[EntryDraft("por.verified", payload)],
        operational=operational,
        engine_version=ENGINE_VERSION,
    )


def por_envelope_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of :class:`PoREnvelopeV1`, as published in ``schemas/``."""
    schema = PoREnvelopeV1.model_json_schema(mode="validation")
    schema.pop("title", None)
    schema.pop("description", None)
    header = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_URL,
        "title": "Cournot ledger PoR-pack envelope, version 1",
        "description": (
            "Value of a record carrying a Cournot PoR pack (key: the market id). Exactly one of pack "
            "and files. Consumers also refuse values over the size limit, invalid UTF-8, NaN/Infinity, "
            "numbers a 64-bit float cannot hold (1e400, 1e-400), integers over 308 digits, duplicate "
            "object keys, nesting deeper than 64, U+0000 or lone surrogates in any string or key, files "
            "that are not base64, the same in every pack file the verifier parses, por_bundle.market_id "
            "and evidence_bundle.bundle_id over 512 bytes of UTF-8, and packs whose required parts are "
            "missing or do not validate."
        ),
    }
    return header | schema


def render_por_json_schema() -> str:
    """The published schema file's exact text (sorted keys, two-space indent, final newline)."""
    return json.dumps(por_envelope_json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":  # python -m consumers.por_envelope > schemas/por-envelope-v1.schema.json
    print(render_por_json_schema(), end="")
