"""Poison records land in the DLQ and the ledger; good records around them commit."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.envelope import wrap_inputs
from tests.helpers.consumer import (
    assert_ledger_exact,
    consumer_env,
    make_inputs,
    publish_raw,
    read_topic,
    run_consumer,
    stored_offsets,
)
from tests.helpers.database import query

pytestmark = pytest.mark.integration

MAX_BYTES = 20_000


def envelope(index: int, change: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    inputs = make_inputs(index)
    document = wrap_inputs(inputs["prompt_spec"], inputs["evidence_bundle"])
    if change is not None:
        change(document)
    return document


def encode(document: Any) -> bytes:
    return json.dumps(document).encode()


def item(document: dict[str, Any]) -> dict[str, Any]:
    first: dict[str, Any] = document["evidence_bundle"]["items"][0]
    return first


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def poisons() -> list[tuple[str, bytes]]:
    """(expected reason code, record value) for every kind of bad input the issue lists, and more."""
    valid = encode(envelope(500))

    def duplicate_evidence(doc: dict[str, Any]) -> None:
        doc["evidence_bundle"]["items"].append(dict(item(doc)))

    return [
        ("oversize", encode(envelope(501, lambda doc: item(doc).update(raw_content="x" * (MAX_BYTES + 1))))),
        ("invalid_utf8", valid.replace(b"Compare price", b"Compare \xc3\x28 price")),
        ("non_finite_number", valid.replace(b'"price_usd": ', b'"price_usd": NaN, "was": ')),
        ("too_deep", encode(envelope(502, lambda doc: item(doc).update(parsed_value=nested(100))))),
        ("duplicate_key", valid.replace(b'"plan_id": "plan_0001"', b'"plan_id": "a", "plan_id": "b"')),
        ("duplicate_evidence_id", encode(envelope(503, duplicate_evidence))),
        ("unknown_envelope_version", encode(envelope(504, lambda doc: doc.update(schema_version=3)))),
        ("unknown_envelope_schema", encode(make_inputs(505))),
        (
            "market_mismatch",
            encode(envelope(506, lambda doc: doc["evidence_bundle"].update(market_id="mk_x"))),
        ),
        (
            "unknown_requirement",
            encode(envelope(507, lambda doc: item(doc).update(requirement_id="req_nope"))),
        ),
        (
            "naive_timestamp",
            encode(
                envelope(508, lambda doc: item(doc)["provenance"].update(fetched_at="2026-02-01T00:00:05"))
            ),
        ),
        ("schema_violation", encode(envelope(509, lambda doc: doc["prompt_spec"]["market"].pop("question")))),
        ("invalid_json", b'{"schema_id": "cournot-ledger/evidence-envelope", '),
        ("not_an_object", b"[1, 2, 3]"),
        ("empty_value", b""),
        # values the store cannot hold, refused at decode with their path (they used to reach the
        # database: U+0000 as ledger_refused, in an id a consumer that exits 1 on every restart;
        # a long id as "database unavailable", retried forever)
        ("unstorable_text", encode(envelope(510, lambda doc: item(doc).update(raw_content="a\u0000b")))),
        ("unstorable_text", encode(envelope(511, lambda doc: set_market(doc, "mk_\u0000_x")))),
        ("unstorable_text", encode(envelope(512, lambda doc: set_market(doc, "\ud800")))),
        (
            "unstorable_text",
            encode(envelope(513, lambda doc: doc["evidence_bundle"].update(bundle_id="\u0000"))),
        ),
        ("value_too_long", encode(envelope(514, lambda doc: set_market(doc, "m" * 3000)))),
        ("number_too_large", valid.replace(b'"volume": 42', b'"volume": ' + b"9" * 4000)),
        ("non_finite_number", valid.replace(b'"volume": 42', b'"volume": 1e400')),
        ("number_underflow", valid.replace(b'"volume": 42', b'"volume": 1e-400')),
    ]


def set_market(doc: dict[str, Any], market_id: str) -> None:
    doc["prompt_spec"]["market"]["market_id"] = market_id
    doc["evidence_bundle"]["market_id"] = market_id


def test_poison_records_are_dead_lettered_and_recorded_while_good_ones_commit(
    kafka_bootstrap: str, database_url: str, topic_name: str, tmp_path: Path
) -> None:
    bad = poisons()
    values: list[bytes] = []
    expected_reason: dict[int, str] = {}
    good_bundles = set()
    for index, (reason, value) in enumerate(bad):
        values.append(encode(envelope(index)))
        good_bundles.add(f"bundle_{index:06d}")
        expected_reason[len(values)] = reason
        values.append(value)
    values.append(encode(envelope(len(bad))))
    good_bundles.add(f"bundle_{len(bad):06d}")
    publish_raw(kafka_bootstrap, topic_name, values)  # one key: one partition, this order
    env = consumer_env(kafka_bootstrap, database_url, topic_name, LEDGER_MAX_MESSAGE_BYTES=str(MAX_BYTES))

    run_consumer(tmp_path, env)

    assert_ledger_exact(database_url, good_bundles)
    rows = query(
        database_url,
        "SELECT kafka_offset, reason_code, field_path, raw_size, raw_sha256, raw_base64, dlq_topic, idempotency_key "
        "FROM ledger.rejections ORDER BY kafka_offset",
    )
    assert {row[0]: row[1] for row in rows} == expected_reason
    for offset, reason, field_path, raw_size, raw_sha256, raw_base64, dlq_topic, key in rows:
        assert raw_size == len(values[offset]) and raw_sha256.startswith("0x")
        assert dlq_topic == f"{topic_name}.dlq"
        assert key.startswith(f"rejected:{topic_name}/") and key.endswith(f"/{offset}")
        assert field_path.startswith("$")
        if reason != "oversize":
            assert base64.b64decode(raw_base64) == values[offset]
    assert dict(rows_by_reason(rows))["naive_timestamp"] == "$.evidence_bundle.items[0].provenance.fetched_at"

    letters = read_topic(kafka_bootstrap, f"{topic_name}.dlq", expected=len(bad))
    assert len(letters) == len(bad)
    by_offset = {}
    for letter in letters:
        headers = {name: value.decode() for name, value in letter.headers}
        assert headers["ledger.dlq.source.topic"] == topic_name
        assert headers["ledger.dlq.message"]
        by_offset[int(headers["ledger.dlq.source.offset"])] = (headers["ledger.dlq.reason"], letter.value)
    assert {offset: reason for offset, (reason, _) in by_offset.items()} == expected_reason
    for offset, (reason, value) in by_offset.items():
        assert value == (b"" if reason == "oversize" else values[offset])

    assert sum(stored_offsets(database_url, f"{topic_name}-group", topic_name).values()) == len(values)
    assert_rejections_point_at_their_dead_letters(database_url, letters)


def assert_rejections_point_at_their_dead_letters(database_url: str, letters: list[Any]) -> None:
    """Each ``ledger.rejections`` row names a DLQ record whose ``ledger.dlq.*`` headers describe it."""
    by_coordinates = {(letter.partition, letter.offset): letter for letter in letters}
    rows = query(
        database_url,
        "SELECT dlq_partition, dlq_offset, kafka_topic, kafka_partition, kafka_offset, reason_code, raw_sha256 "
        "FROM ledger.rejections",
    )
    assert rows
    for dlq_partition, dlq_offset, topic, partition, offset, reason, raw_sha256 in rows:
        assert dlq_partition is not None and dlq_offset is not None, "rejection without DLQ coordinates"
        letter = by_coordinates[(dlq_partition, dlq_offset)]
        headers = {name: value.decode() for name, value in letter.headers if name.startswith("ledger.dlq.")}
        assert (
            headers["ledger.dlq.source.topic"],
            int(headers["ledger.dlq.source.partition"]),
            int(headers["ledger.dlq.source.offset"]),
            headers["ledger.dlq.reason"],
            headers["ledger.dlq.value.sha256"],
        ) == (topic, partition, offset, reason, raw_sha256)


def rows_by_reason(rows: list[tuple[Any, ...]]) -> list[tuple[str, str]]:
    return [(row[1], row[2]) for row in rows]
