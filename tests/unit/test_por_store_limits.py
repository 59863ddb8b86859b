"""PoR envelopes are held to the store limits exactly like evidence envelopes (engine/limits.py).

Every hostile value is refused at decode with its specific reason code and JSON path, whether it
sits in the single-document pack or inside a base64 file, and the rejection is always storable.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from consumers.por_envelope import decode_por_envelope
from consumers.processing import RecordContext, Rejection, process_record
from engine.envelope import EnvelopeError, Reason
from engine.limits import find_unstorable_text
from ledger.por_files import read_pack_files

ROOT = Path(__file__).resolve().parents[2]
PACKS = ROOT / "tests" / "data" / "por_packs"
HEAD = {"schema_id": "cournot-ledger/por-envelope", "schema_version": 1}
DOCUMENT = json.loads((PACKS / "genuine" / "conflicting_sources_document.json").read_text(encoding="utf-8"))
PRICE = re.compile(r'("price_usd": )[0-9.]+')


def pack_envelope(pack: dict[str, Any]) -> str:
    return json.dumps({**HEAD, "pack": pack})


def with_price(literal: str) -> bytes:
    return PRICE.sub(lambda m: m.group(1) + literal, pack_envelope(DOCUMENT), count=1).encode()


def changed(edit: Any) -> bytes:
    pack = copy.deepcopy(DOCUMENT)
    edit(pack)
    return pack_envelope(pack).encode("utf-8")


def set_question(text: str) -> Any:
    return lambda pack: pack["prompt_spec"]["market"].__setitem__("question", text)


def set_por_market(market_id: str) -> Any:
    def edit(pack: dict[str, Any]) -> None:
        pack["por_bundle"]["market_id"] = market_id
        pack["por_bundle"]["verdict"]["market_id"] = market_id

    return edit


def files_envelope(
    edit_file: str | None = None, edit: Any = None, extra: dict[str, bytes] | None = None
) -> bytes:
    files = read_pack_files(PACKS / "genuine" / "two_sources_agree")
    if edit_file is not None:
        files[edit_file] = edit(files[edit_file])
    files.update(extra or {})
    encoded = {name: base64.b64encode(data).decode("ascii") for name, data in files.items()}
    return json.dumps({**HEAD, "files": encoded}).encode("utf-8")


def prepend(fragment: bytes) -> Any:
    return lambda data: data.replace(b"{", b"{" + fragment + b", ", 1)


CASES = [
    (changed(set_question("a\x00b")), Reason.UNSTORABLE_TEXT, "$.pack.prompt_spec.market.question"),
    (
        pack_envelope(DOCUMENT).replace('"question": "', '"question": "\\ud800', 1).encode(),
        Reason.UNSTORABLE_TEXT,
        "$.pack.prompt_spec.market.question",
    ),
    (changed(set_por_market("m" * 600)), Reason.VALUE_TOO_LONG, "$.pack.por_bundle.market_id"),
    (changed(set_por_market("m\x00")), Reason.UNSTORABLE_TEXT, "$.pack.por_bundle.market_id"),
    (
        changed(lambda pack: pack["evidence_bundle"].__setitem__("bundle_id", "b" * 600)),
        Reason.VALUE_TOO_LONG,
        "$.pack.evidence_bundle.bundle_id",
    ),
    (
        with_price("9" * 400),
        Reason.NUMBER_TOO_LARGE,
        "$.pack.evidence_bundle.items[0].extracted_fields.price_usd",
    ),
    (
        with_price("9" * 5000),
        Reason.NUMBER_TOO_LARGE,
        "$.pack.evidence_bundle.items[0].extracted_fields.price_usd",
    ),
    (
        with_price("1e400"),
        Reason.NON_FINITE_NUMBER,
        "$.pack.evidence_bundle.items[0].extracted_fields.price_usd",
    ),
    (
        with_price("1e-400"),
        Reason.NUMBER_UNDERFLOW,
        "$.pack.evidence_bundle.items[0].extracted_fields.price_usd",
    ),
    (
        files_envelope(
            "prompt_spec.json", lambda data: json.dumps({**json.loads(data), "x": "\x00"}).encode()
        ),
        Reason.UNSTORABLE_TEXT,
        '$.files["prompt_spec.json"].x',
    ),
    (
        files_envelope("prompt_spec.json", prepend(b'"x": "\\udfff"')),
        Reason.UNSTORABLE_TEXT,
        '$.files["prompt_spec.json"].x',
    ),
    (
        files_envelope("evidence_bundle.json", prepend(b'"x": ' + b"9" * 400)),
        Reason.NUMBER_TOO_LARGE,
        '$.files["evidence_bundle.json"].x',
    ),
    (
        files_envelope("verdict.json", prepend(b'"x": 1e400')),
        Reason.NON_FINITE_NUMBER,
        '$.files["verdict.json"].x',
    ),
    (
        files_envelope("manifest.json", prepend(b'"x": 1, "x": 2')),
        Reason.DUPLICATE_KEY,
        '$.files["manifest.json"].x',
    ),
    (
        files_envelope("prompt_spec.json", lambda data: b"\xff" + data),
        Reason.INVALID_UTF8,
        '$.files["prompt_spec.json"]',
    ),
    (files_envelope(extra={"a\x00b": b"x"}), Reason.UNSTORABLE_TEXT, '$.files["a\\u0000b"]'),
]


@pytest.mark.parametrize(("raw", "reason", "path"), CASES)
def test_hostile_pack_values_are_refused_with_a_specific_reason_and_path(
    raw: bytes, reason: Reason, path: str
) -> None:
    with pytest.raises(EnvelopeError) as refused:
        decode_por_envelope(raw)
    assert (refused.value.reason, refused.value.path) == (reason, path)


@pytest.mark.parametrize(("raw", "reason", "path"), CASES)
def test_the_rejection_of_every_hostile_pack_is_storable(raw: bytes, reason: Reason, path: str) -> None:
    context = RecordContext("t", 0, 7, b"k", raw, None, (), "g", "h", datetime(2026, 1, 1, tzinfo=UTC))
    outcome = process_record(
        context, lambda *_: pytest.fail("not an evidence envelope"), dlq_topic="dlq", max_bytes=1 << 20
    )
    assert isinstance(outcome, Rejection) and outcome.error.reason == reason
    payload = outcome.draft.entries[0].payload
    assert find_unstorable_text(payload) is None
    assert find_unstorable_text([outcome.draft.market_id, outcome.draft.bundle_id]) is None


def test_the_genuine_packs_still_decode() -> None:
    assert decode_por_envelope(pack_envelope(DOCUMENT).encode()) is not None
    assert decode_por_envelope(files_envelope()) is not None


def naive_fetch(pack: dict[str, Any]) -> None:
    pack["evidence_bundle"]["items"][1]["provenance"]["fetched_at"] = "2026-02-01T00:00:04"


@pytest.mark.parametrize(
    ("raw", "reason", "path"),
    [
        (
            changed(lambda pack: pack["reasoning_trace"]["steps"][0].pop("step_type")),
            Reason.SCHEMA_VIOLATION,
            "$.pack.reasoning_trace.steps[0].step_type",
        ),
        (
            changed(naive_fetch),
            Reason.NAIVE_TIMESTAMP,
            "$.pack.evidence_bundle.items[1].provenance.fetched_at",
        ),
    ],
)
def test_part_refusals_give_a_json_path_and_the_evidence_envelope_reason(
    raw: bytes, reason: Reason, path: str
) -> None:
    with pytest.raises(EnvelopeError) as refused:
        decode_por_envelope(raw)
    assert (refused.value.reason, refused.value.path) == (reason, path)


def test_an_unexpected_decoder_error_is_a_rejection_not_a_stopped_consumer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import consumers.por_processing

    def broken(*_: Any, **__: Any) -> Any:
        raise RecursionError("a decoder bug")

    monkeypatch.setattr(consumers.por_processing, "decode_por_envelope", broken)
    raw = pack_envelope(DOCUMENT).encode()
    context = RecordContext("t", 0, 7, b"k", raw, None, (), "g", "h", datetime(2026, 1, 1, tzinfo=UTC))
    outcome = process_record(
        context, lambda *_: pytest.fail("not an evidence envelope"), dlq_topic="dlq", max_bytes=1 << 20
    )
    assert isinstance(outcome, Rejection) and outcome.error.reason == Reason.AUDIT_FAILED
    assert "RecursionError" in outcome.error.message
