"""One decoder for every door: ``ledger audit FILE`` and the consumer give the same bytes the same
verdict, with the same reason code (the poison corpus of the demo and one record per reason)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from consumers.processing import Audited, RecordContext, Rejection, process_record
from engine.envelope import wrap_inputs
from ledger.store.drafts import audit_envelope

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "devstack" / "demo_corpus"
MAX_BYTES = 1_048_576  # the consumer's default limit, which `ledger audit` reads from the same setting
BODY: dict[str, Any] = json.loads((DEMO / "bundles" / "02_btc_two_sources_agree.json").read_text())


def envelope(change: Callable[[dict[str, Any]], None] | None = None) -> bytes:
    document = json.loads(json.dumps(wrap_inputs(BODY["prompt_spec"], BODY["evidence_bundle"])))
    if change is not None:
        change(document)
    return json.dumps(document, allow_nan=True).encode()


def first_item(document: dict[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = document["evidence_bundle"]["items"][0]
    return item


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


# reason code -> the bytes of a record the consumer refuses with it
POISON: dict[str, bytes] = {
    "invalid_json": (DEMO / "poison" / "11_truncated_json.json").read_bytes(),
    "non_finite_number": (DEMO / "poison" / "12_nan_price.json").read_bytes(),
    "oversize": envelope(lambda d: first_item(d).update(raw_content="x" * MAX_BYTES)),
    "invalid_utf8": envelope().replace(b"Compare", b"Comp\xc3\x28re", 1),
    "duplicate_key": envelope().replace(
        b'"schema_version": 1', b'"schema_version": 1, "schema_version": 1', 1
    ),
    "too_deep": envelope(lambda d: first_item(d).update(parsed_value=nested(80))),
    "not_an_object": b"[1, 2, 3]",
    "unknown_envelope_version": envelope(lambda d: d.update(schema_version=3)),
    "unknown_envelope_schema": envelope(lambda d: d.update(schema_id="someone-else/envelope")),
    "schema_violation": envelope(lambda d: d["prompt_spec"]["market"].update(possible_outcomes=3)),
    "naive_timestamp": envelope(
        lambda d: first_item(d)["provenance"].update(fetched_at="2026-02-01T00:00:05")
    ),
    "market_mismatch": envelope(lambda d: d["evidence_bundle"].update(market_id="mk_elsewhere")),
    "duplicate_evidence_id": envelope(lambda d: d["evidence_bundle"]["items"].append(dict(first_item(d)))),
    "unknown_requirement": envelope(lambda d: first_item(d).update(requirement_id="req_elsewhere")),
    "unstorable_text": envelope(lambda d: first_item(d)["parsed_value"].update(note="\ud800")),
}


def consumer_verdict(value: bytes) -> str:
    """What the consumer does with a record holding ``value``: ``audited`` or the reason code."""
    context = RecordContext(
        topic="evidence-bundles",
        partition=0,
        offset=0,
        key=None,
        value=value,
        timestamp_ms=None,
        headers=(),
        group="test",
        host="test",
        received_at=datetime(2026, 2, 1, tzinfo=UTC),
    )
    outcome = process_record(context, audit_envelope, dlq_topic="evidence-bundles.dlq", max_bytes=MAX_BYTES)
    if isinstance(outcome, Rejection):
        return outcome.error.reason.value
    assert isinstance(outcome, Audited)
    return "audited"


def audit_verdict(value: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """What ``ledger audit FILE`` does with a file holding ``value``: ``audited`` or the reason code."""
    path = tmp_path / "input.json"
    path.write_bytes(value)
    code = main(["audit", str(path)])
    err = capsys.readouterr().err
    if code == 0:
        return "audited"
    assert code == 1, err  # the thing checked failed: invalid input (2 is for an unreadable file)
    first = err.splitlines()[0]
    assert first.startswith(f"ledger audit: invalid input {path}: "), err
    return first.rsplit(": ", 1)[1]


@pytest.mark.parametrize("reason", sorted(POISON))
def test_poison_gets_the_same_reason_code_through_both_doors(
    reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    value = POISON[reason]
    assert consumer_verdict(value) == reason
    assert audit_verdict(value, tmp_path, capsys) == reason


def test_a_valid_envelope_is_audited_through_both_doors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert consumer_verdict(envelope()) == "audited"
    assert audit_verdict(envelope(), tmp_path, capsys) == "audited"


def test_an_envelope_body_gets_the_verdict_of_the_envelope_publish_would_send(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = json.loads(json.dumps(BODY))
    assert audit_verdict(json.dumps(body).encode(), tmp_path, capsys) == "audited"
    body["evidence_bundle"]["market_id"] = "mk_elsewhere"  # accepted by the old `ledger audit`
    assert audit_verdict(json.dumps(body).encode(), tmp_path, capsys) == "market_mismatch"
    wrapped = json.dumps(wrap_inputs(body["prompt_spec"], body["evidence_bundle"])).encode()
    assert consumer_verdict(wrapped) == "market_mismatch"
