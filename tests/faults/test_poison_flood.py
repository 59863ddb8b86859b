"""A flood of poison records mixed with good ones across partitions: nothing lost, nothing blocks.

``tests/integration/test_consumer_poison.py`` sends one record of each bad kind to one partition.
Here 300 records, about a third of them bad (twenty-five kinds, repeated, shuffled with a seeded
random order, on three partitions, some with null keys and a tombstone), go through one
``ledger consume`` run: every good bundle must be committed exactly once, every bad record must be
in the dead-letter topic (once, with its original key, value and headers followed by the
``ledger.dlq.*`` headers naming the reason and the source coordinates) and recorded as a
``submission.rejected`` entry with the same reason, and the stored offsets must reach the end of
every partition.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from consumers.publisher import PreparedRecord, SentRecord, prepare_document
from engine.envelope import wrap_inputs
from tests.helpers.database import query
from tests.helpers.faults import (
    assert_ledger_matches,
    consumer_env,
    create_topic,
    make_inputs,
    read_topic,
    run_consumer,
    send_keyed,
)

pytestmark = pytest.mark.integration

TOTAL = 300
PARTITIONS = 3
MAX_BYTES = 20_000


def envelope(index: int, change: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    inputs = make_inputs(index, markets=12)
    document = wrap_inputs(inputs["prompt_spec"], inputs["evidence_bundle"])
    if change is not None:
        change(document)
    return document


def encode(document: Any) -> bytes:
    return json.dumps(document, allow_nan=True).encode()


def item(document: dict[str, Any]) -> dict[str, Any]:
    first: dict[str, Any] = document["evidence_bundle"]["items"][0]
    return first


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = {"n": value} if depth % 2 else [value]
    return value


def set_market(document: dict[str, Any], market_id: str) -> None:
    document["prompt_spec"]["market"]["market_id"] = market_id
    document["evidence_bundle"]["market_id"] = market_id


def duplicate_evidence(document: dict[str, Any]) -> None:
    document["evidence_bundle"]["items"].append(dict(item(document)))


PoisonMaker = Callable[[int, random.Random], bytes | None]
# reason code -> a maker of a bad value (index makes each one distinct)
POISONS: dict[str, PoisonMaker] = {
    "oversize": lambda i, rng: encode(envelope(i, lambda d: item(d).update(raw_content="x" * MAX_BYTES))),
    "invalid_utf8": lambda i, rng: encode(envelope(i)).replace(b"Compare price", b"Compare \xc3\x28 price"),
    "non_finite_number": lambda i, rng: encode(
        envelope(i, lambda d: item(d)["parsed_value"].update(bad=rng.choice([float("nan"), float("inf")])))
    ),
    "too_deep": lambda i, rng: encode(
        envelope(i, lambda d: item(d).update(parsed_value=nested(70 + i % 50)))
    ),
    "duplicate_key": lambda i, rng: encode(envelope(i)).replace(
        b'"plan_id": ', b'"plan_id": "a", "plan_id": ', 1
    ),
    "duplicate_evidence_id": lambda i, rng: encode(envelope(i, duplicate_evidence)),
    "unknown_envelope_version": lambda i, rng: encode(
        envelope(i, lambda d: d.update(schema_version=rng.choice([0, 3, 99, "1", True])))
    ),
    "unknown_envelope_schema": lambda i, rng: encode(make_inputs(i)),
    "market_mismatch": lambda i, rng: encode(
        envelope(i, lambda d: d["evidence_bundle"].update(market_id="mk_x"))
    ),
    "unknown_requirement": lambda i, rng: encode(
        envelope(i, lambda d: item(d).update(requirement_id="req_x"))
    ),
    "naive_timestamp": lambda i, rng: encode(
        envelope(i, lambda d: item(d)["provenance"].update(fetched_at="2026-02-01T00:00:05"))
    ),
    "schema_violation": lambda i, rng: encode(
        envelope(i, lambda d: d["prompt_spec"]["market"].update(possible_outcomes=i))
    ),
    "invalid_json": lambda i, rng: encode(envelope(i))[: rng.randrange(1, 400)],
    "not_an_object": lambda i, rng: rng.choice([b"[1, 2, 3]", b'"envelope"', b"42", b"null", b"true"]),
    "empty_value": lambda i, rng: rng.choice([b"", None]),  # empty or a tombstone
    "binary_garbage": lambda i, rng: b"\x80" + rng.randbytes(rng.randrange(0, 200)),
    # values the store cannot hold, refused at decode (they used to reach the database)
    "unstorable_text": lambda i, rng: encode(envelope(i, lambda d: item(d).update(raw_content="a\u0000b"))),
    "unstorable_market_id": lambda i, rng: encode(
        envelope(i, lambda d: set_market(d, rng.choice(["mk_\u0000_x", "\ud800", "mk_\udfff"])))
    ),
    "unstorable_bundle_id": lambda i, rng: encode(
        envelope(i, lambda d: d["evidence_bundle"].update(bundle_id=rng.choice(["\u0000", "b\ud800"])))
    ),
    "unstorable_evidence_id": lambda i, rng: encode(
        envelope(i, lambda d: item(d).update(evidence_id="e\u0000"))
    ),
    "value_too_long": lambda i, rng: encode(
        envelope(i, lambda d: set_market(d, "m" * rng.randrange(600, 4000)))
    ),
    "number_too_large": lambda i, rng: encode(envelope(i)).replace(
        b'"volume": 42', b'"volume": ' + b"9" * rng.randrange(309, 4500)
    ),
    "float_overflow": lambda i, rng: encode(envelope(i)).replace(b'"volume": 42', b'"volume": 1e400'),
    "number_underflow": lambda i, rng: encode(envelope(i)).replace(b'"volume": 42', b'"volume": 1e-400'),
    "deep_duplicate_key": lambda i, rng: encode(envelope(i)).replace(
        b'"volume": 42', b'"volume": {"a": 1, "a": 2}'
    ),
}
REASON = {  # the reason code a kind is recorded under
    "binary_garbage": "invalid_utf8",
    "unstorable_market_id": "unstorable_text",
    "unstorable_bundle_id": "unstorable_text",
    "unstorable_evidence_id": "unstorable_text",
    "float_overflow": "non_finite_number",
    "deep_duplicate_key": "duplicate_key",
}


def sha256(value: bytes | None) -> str:
    return "0x" + hashlib.sha256(value or b"").hexdigest()


def test_poison_flood_across_partitions_every_good_one_committed_every_bad_one_recorded(
    kafka_bootstrap: str, database_url: str, topic_name: str, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    create_topic(kafka_bootstrap, topic_name, PARTITIONS)
    kinds = sorted(POISONS)
    plan: list[str | None] = [kinds[i % len(kinds)] for i in range(TOTAL // 3)]  # every kind, repeated
    plan += [None] * (TOTAL - len(plan))
    rng.shuffle(plan)
    markets = [f"mk_test_{m:03d}".encode() for m in range(12)]
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = []
    prepared: list[PreparedRecord | None] = []
    for index, kind in enumerate(plan):
        trace = [("trace-id", f"flood-{index}".encode())]
        if kind is None:
            good = prepare_document(make_inputs(1000 + index, markets=12), headers=trace)
            prepared.append(good)
            records.append((good.key, good.value, list(good.headers)))
        else:
            prepared.append(None)
            value = POISONS[kind](index, rng)
            # a null key with an omitted (oversize) value is a pill of its own: see the test below;
            # a null key with a null value cannot be produced at all
            keyless_ok = kind != "oversize" and value is not None
            records.append((rng.choice([*markets, None] if keyless_ok else markets), value, trace))
    landed = send_keyed(kafka_bootstrap, topic_name, records)
    assert len({partition for partition, _ in landed}) > 1, f"seed {seed}: the flood hit one partition only"

    sent = [
        SentRecord(record, topic_name, partition, offset)
        for record, (partition, offset) in zip(prepared, landed, strict=True)
        if record is not None
    ]
    poison = {
        coordinates: REASON.get(kind, kind)
        for kind, coordinates in zip(plan, landed, strict=True)
        if kind is not None
    }
    source = dict(zip(landed, records, strict=True))
    env = consumer_env(kafka_bootstrap, database_url, topic_name, LEDGER_MAX_MESSAGE_BYTES=str(MAX_BYTES))

    run_consumer(tmp_path, env, "--max-records", "25", name="flooded", timeout=300)

    context = f"seed {seed}"
    assert_ledger_matches(
        database_url, env["LEDGER_GROUP_ID"], topic_name, sent, poison=poison, context=context
    )
    rows = query(
        database_url,
        "SELECT kafka_partition, kafka_offset, idempotency_key, raw_size, raw_sha256, raw_base64, dlq_topic, "
        "field_path, message FROM ledger.rejections",
    )
    for partition, offset, key, raw_size, raw_sha256, raw_base64, dlq_topic, field_path, message in rows:
        _, value, _ = source[(partition, offset)]
        assert key == f"rejected:{topic_name}/{partition}/{offset}", context
        assert (raw_size, raw_sha256) == (len(value or b""), sha256(value)), (context, partition, offset)
        if raw_base64 is not None:
            assert base64.b64decode(raw_base64) == (value or b""), (context, partition, offset)
        assert dlq_topic == env["LEDGER_DLQ_TOPIC"] and field_path.startswith("$") and message, context

    letters = read_topic(kafka_bootstrap, env["LEDGER_DLQ_TOPIC"], expected=len(poison))
    by_source: Counter[tuple[int, int]] = Counter()
    for letter in letters:
        headers = dict(letter.headers)
        ours = {name.removeprefix("ledger.dlq."): value.decode() for name, value in headers.items()}
        coordinates = (int(ours["source.partition"]), int(ours["source.offset"]))
        by_source[coordinates] += 1
        key, value, trace = source[coordinates]
        where = f"{context}: dead letter of {coordinates} ({poison.get(coordinates)})"
        assert ours["reason"] == poison[coordinates], where
        assert ours["source.topic"] == topic_name and ours["message"] and ours["path"].startswith("$"), where
        assert ours["value.sha256"] == sha256(value) and ours["value.bytes"] == str(len(value or b"")), where
        assert letter.key == key, where
        assert list(letter.headers[: len(trace)]) == trace, where  # the original headers come first
        if poison[coordinates] == "oversize":
            assert ours["value.omitted"] == "true" and letter.value == b"", where
        else:
            assert ours["value.omitted"] == "false" and (letter.value or b"") == (value or b""), where
    assert set(by_source) == set(poison), (
        f"{context}: no dead letter for {sorted(set(poison) - set(by_source))}"
    )
    assert max(by_source.values()) == 1, f"{context}: duplicated dead letters without any fault"
    reasons = Counter(poison.values())
    assert len(reasons) == len({REASON.get(kind, kind) for kind in POISONS}), reasons


def run_pill(
    kafka_bootstrap: str,
    database_url: str,
    topic_name: str,
    tmp_path: Path,
    pill: tuple[bytes | None, bytes],
    reason: str,
) -> None:
    """[good, pill, good] on one partition: the consumer must finish and record the pill."""
    good = [prepare_document(make_inputs(index)) for index in range(2)]
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = [
        (good[0].key, good[0].value, []),
        (pill[0], pill[1], []),
        (good[1].key, good[1].value, []),
    ]
    create_topic(kafka_bootstrap, topic_name, 1)
    landed = send_keyed(kafka_bootstrap, topic_name, records)
    env = consumer_env(kafka_bootstrap, database_url, topic_name, LEDGER_MAX_MESSAGE_BYTES=str(MAX_BYTES))

    run_consumer(tmp_path, env, name="pill", timeout=120)

    sent = [SentRecord(good[0], topic_name, *landed[0]), SentRecord(good[1], topic_name, *landed[2])]
    assert_ledger_matches(
        database_url, env["LEDGER_GROUP_ID"], topic_name, sent, poison={landed[1]: reason}, context=reason
    )
    letters = read_topic(kafka_bootstrap, env["LEDGER_DLQ_TOPIC"], expected=1)
    assert len(letters) == 1 and dict(letters[0].headers)["ledger.dlq.reason"] == reason.encode()


def test_an_oversize_record_without_a_key_is_dead_lettered_instead_of_stopping_the_consumer(
    kafka_bootstrap: str, database_url: str, topic_name: str, tmp_path: Path
) -> None:
    """The dead letter of an oversize record omits the value; with no key either, aiokafka's
    ``send`` asserts "Need at least one: key or value" (consumers/dlq.py, ``DeadLetterSender.send``).
    AssertionError is not retryable, so the consumer dies, and dies again on every restart."""
    oversize = encode(envelope(7, lambda d: item(d).update(raw_content="x" * MAX_BYTES)))
    run_pill(kafka_bootstrap, database_url, topic_name, tmp_path, (None, oversize), "oversize")


def test_an_unhashable_schema_version_is_dead_lettered_instead_of_stopping_the_consumer(
    kafka_bootstrap: str, database_url: str, topic_name: str, tmp_path: Path
) -> None:
    """``decode_envelope`` raises TypeError for ``"schema_version": [1]`` (engine/envelope.py,
    ``_check_version``); ``process_record`` only catches EnvelopeError, so the consumer dies on
    this record, and on every restart, since it is never committed: a poison pill."""
    pill = encode(envelope(7, lambda d: d.update(schema_version=[1])))
    run_pill(
        kafka_bootstrap,
        database_url,
        topic_name,
        tmp_path,
        (b"mk_test_007", pill),
        "unknown_envelope_version",
    )
