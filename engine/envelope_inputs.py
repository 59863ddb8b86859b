"""The other doors into the one envelope decoder: files given to ``ledger publish`` and ``ledger
audit``, and inputs stored in the ledger (replay, the reasoning stage).

A file may hold a whole envelope or only its body (``prompt_spec`` and ``evidence_bundle``, with
optional ``event_id`` and ``options``); :func:`decode_submission` gives it exactly the verdict the
consumer would give the record ``ledger publish`` sends for it. :func:`decode_stored_inputs`
re-checks a stored ``submission.received`` payload with the consumer's rules, so a ledger row the
consumer would have refused is refused again, with the same reason code.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engine.envelope import (
    ENVELOPE_SCHEMA_ID,
    ENVELOPE_SCHEMA_VERSION,
    LATEST_ENVELOPE_VERSION,
    DecodedEnvelope,
    EnvelopeError,
    Reason,
    decode_envelope,
    from_strict_json_error,
    validate_envelope,
)
from engine.jsonio import DEFAULT_MAX_DEPTH, StrictJSONError, loads_strict
from engine.limits import MAX_INTEGER_DIGITS

__all__ = ["as_envelope_document", "decode_stored_inputs", "decode_submission", "encode_envelope"]

_BODY_KEYS = frozenset({"prompt_spec", "evidence_bundle"})  # an envelope without its header
_V2_OPTION_KEYS = frozenset({"reasoning_query", "reasoning_expression"})


def as_envelope_document(
    document: Any, *, event_id: str | None = None, verify_reasoning: bool | None = None
) -> dict[str, Any]:
    """The envelope for a document ``ledger publish`` or ``ledger audit`` reads.

    A document with ``schema_id`` or ``schema_version`` is an envelope and stays as it is; one with
    neither but with ``prompt_spec`` and ``evidence_bundle`` is an envelope body (optionally with
    ``event_id`` and ``options``) and gets the v1 header. Nothing else changes: whatever the body
    holds besides is validated, and refused, by :func:`decode_envelope`. Any other object is
    ``unknown_envelope_schema``, as on the consumer. ``event_id`` and ``verify_reasoning`` override
    the document's own.
    """
    if not isinstance(document, dict):
        raise EnvelopeError(
            Reason.NOT_AN_OBJECT, f"envelope must be a JSON object, got {type(document).__name__}"
        )
    envelope = dict(document)
    if "schema_id" not in envelope and "schema_version" not in envelope:
        if not envelope.keys() >= _BODY_KEYS:
            raise EnvelopeError(
                Reason.UNKNOWN_SCHEMA,
                f"expected a {ENVELOPE_SCHEMA_ID} v{ENVELOPE_SCHEMA_VERSION} envelope or an object with "
                "'prompt_spec' and 'evidence_bundle'",
            )
        envelope = {"schema_id": ENVELOPE_SCHEMA_ID, "schema_version": _body_version(envelope), **envelope}
        envelope.setdefault("options", {"verify_reasoning": False})
    if event_id is not None:
        envelope["event_id"] = event_id
    if verify_reasoning is not None:
        options = envelope.get("options", {})
        if isinstance(options, dict):  # anything else stays, for the decoder to refuse
            envelope["options"] = {**options, "verify_reasoning": verify_reasoning}
    return envelope


def _body_version(body: Mapping[str, Any]) -> int:
    """The version a header-less body gets: 2 when its options use a version-2 field, else 1."""
    options = body.get("options")
    if isinstance(options, Mapping) and _V2_OPTION_KEYS & options.keys():
        return LATEST_ENVELOPE_VERSION
    return ENVELOPE_SCHEMA_VERSION


def encode_envelope(envelope: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON of an envelope document (the record value ``ledger publish`` sends).

    A string holding a lone surrogate (from a ``\\ud800`` escape) has no UTF-8 form; the document
    is then written with ASCII escapes, so that the decoder sees the very same document and gives
    it the verdict it would give the original bytes.
    """
    try:
        text = json.dumps(envelope, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        raise EnvelopeError(Reason.NON_FINITE_NUMBER, str(exc)) from exc
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(envelope, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")


def decode_submission(
    raw: bytes | None, *, max_bytes: int = 1_048_576, max_depth: int = DEFAULT_MAX_DEPTH
) -> DecodedEnvelope:
    """Decode a file given to ``ledger audit`` or ``ledger publish``: the same decoder, the same verdict.

    An envelope is decoded from these exact bytes by :func:`decode_envelope`, exactly as the
    consumer decodes a record value. An envelope body (no header, see :func:`as_envelope_document`)
    is decoded as the envelope ``ledger publish`` would send for it.
    """
    if not raw:
        raise EnvelopeError(Reason.EMPTY, "the input is empty")
    if len(raw) > max_bytes:
        raise EnvelopeError(Reason.OVERSIZE, f"the input is {len(raw)} bytes, the limit is {max_bytes}")
    try:
        # the consumer's number checks too: 1e-400 must not turn into 0.0 before it is re-encoded
        document = loads_strict(
            raw, max_depth=max_depth, max_integer_digits=MAX_INTEGER_DIGITS, exact_numbers=True
        )
    except StrictJSONError as exc:
        raise from_strict_json_error(exc) from exc
    if not isinstance(document, dict) or "schema_id" in document or "schema_version" in document:
        # an envelope (or not even an object): the consumer's verdict on these very bytes.
        # decode_envelope(raw) would make the same size checks (passed above) and this very decode
        # (same bytes, same limits) before validate_envelope: the bytes are not parsed twice.
        return validate_envelope(document, raw)
    value = encode_envelope(as_envelope_document(document))
    return decode_envelope(value, max_bytes=max_bytes, max_depth=max_depth)


def decode_stored_inputs(received: Mapping[str, Any], raw: bytes | None = None) -> DecodedEnvelope:
    """The envelope of a stored ``submission.received`` payload, through the decoder's validation.

    Replay and verification re-check stored inputs with the rules the consumer applied on the way
    in (models, market ids, evidence and requirement ids, canonical form), so a ledger row that the
    consumer would have refused is refused again, with the same reason code. ``raw``: the UTF-8
    bytes ``received`` was parsed from, when the caller has them; as in :func:`validate_envelope`
    they only let the storable-text check skip its walk when they cannot hold U+0000 or a lone
    surrogate.
    """
    header = received.get("envelope")
    header = header if isinstance(header, Mapping) else {}
    document: dict[str, Any] = {
        "schema_id": header.get("schema_id", ENVELOPE_SCHEMA_ID),
        "schema_version": header.get("schema_version", ENVELOPE_SCHEMA_VERSION),
        "prompt_spec": received.get("prompt_spec"),
        "evidence_bundle": received.get("evidence_bundle"),
    }
    if header.get("event_id") is not None:
        document["event_id"] = header["event_id"]
    if "envelope_options" in received:
        document["options"] = received["envelope_options"]
    return validate_envelope(document, raw)
