"""The hostile corpus among good records on three partitions: nothing stops the consumer.

Every record of ``tests/helpers/hostile.py`` (U+0000 or lone surrogates in ids and elsewhere, ids
too long for their index, huge integers, numbers a double cannot hold, a duplicate key deep in the
document) is published twice, interleaved with good records. One long-running ``ledger consume``
(no ``--until-idle``) must: commit every good record once; record every bad one as exactly one
``submission.rejected`` (with its coordinates, reason and path) and one dead letter; still be
running once the stored offsets reach the end of every partition; stop cleanly on SIGTERM. Then
``ledger verify`` passes. The old consumer exited 1 on the first U+0000 id (on every restart) and
retried a long id forever as "database unavailable".
"""

from __future__ import annotations

import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from consumers.publisher import PreparedRecord, SentRecord, prepare_document
from ledger.migration import upgrade
from tests.helpers.database import query
from tests.helpers.faults import (
    GROUP_TIMING,
    ConsumerProcess,
    assert_ledger_matches,
    consumer_env,
    create_topic,
    dead_letter_sources,
    make_inputs,
    read_until,
    send_keyed,
    stored_offsets,
)
from tests.helpers.hostile import HOSTILE
from tests.helpers.replay import ledger_json

pytestmark = pytest.mark.integration

PARTITIONS = 3
GOOD = 45
CATCH_UP = 240.0


def test_the_hostile_corpus_among_good_records_is_rejected_record_by_record_and_the_consumer_runs_on(
    kafka_bootstrap: str, database_url: str, topic_name: str, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    upgrade(database_url)  # the progress poll below reads the offsets table from the start
    create_topic(kafka_bootstrap, topic_name, PARTITIONS)
    plan: list[int | None] = [index for index in range(len(HOSTILE)) for _ in range(2)] + [None] * GOOD
    rng.shuffle(plan)
    keys = [f"mk_test_{m:03d}".encode() for m in range(12)]
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = []
    prepared: list[PreparedRecord | None] = []
    for position, case in enumerate(plan):
        if case is None:
            good = prepare_document(make_inputs(2000 + position, markets=12))
            prepared.append(good)
            records.append((good.key, good.value, []))
        else:
            prepared.append(None)
            records.append((rng.choice(keys), HOSTILE[case][1], [("case", HOSTILE[case][0].encode())]))
    landed = send_keyed(kafka_bootstrap, topic_name, records)
    assert len({partition for partition, _ in landed}) == PARTITIONS, f"seed {seed}: not spread"
    sent = [
        SentRecord(record, topic_name, *coordinates)
        for record, coordinates in zip(prepared, landed, strict=True)
        if record is not None
    ]
    bad = {
        coordinates: HOSTILE[case] for case, coordinates in zip(plan, landed, strict=True) if case is not None
    }
    ends: dict[int, int] = {}
    for partition, offset in landed:
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    env = consumer_env(kafka_bootstrap, database_url, topic_name)
    group = env["LEDGER_GROUP_ID"]

    consumer = ConsumerProcess(["--max-records", "20", *GROUP_TIMING], env, tmp_path / "consumer.log")
    try:
        deadline = time.monotonic() + CATCH_UP
        while time.monotonic() < deadline and consumer.proc.poll() is None:
            stored = stored_offsets(database_url, group, topic_name)
            if all(stored.get(partition, 0) >= end for partition, end in ends.items()):
                break
            time.sleep(0.3)
        running = consumer.proc.poll() is None
        consumer.signal(signal.SIGTERM)
        status = consumer.wait(60)
    finally:
        consumer.stop()
    log_tail = consumer.log_path.read_text(errors="replace")[-4000:]
    assert running, f"seed {seed}: the consumer stopped before the end of the corpus:\n{log_tail}"
    assert status == 0, f"seed {seed}: exit {status}:\n{log_tail}"
    assert "retrying" not in consumer.log_path.read_text(errors="replace"), f"seed {seed}: a retry loop"

    context = f"seed {seed}"
    poison = {coordinates: reason for coordinates, (_, _, reason, _) in bad.items()}
    assert_ledger_matches(database_url, group, topic_name, sent, poison=poison, context=context)
    rows = query(
        database_url,
        "SELECT kafka_partition, kafka_offset, reason_code, field_path, dlq_topic, dlq_partition, dlq_offset "
        "FROM ledger.rejections",
    )
    assert len(rows) == len(bad), context
    letters = read_until(kafka_bootstrap, env["LEDGER_DLQ_TOPIC"], lambda got: len(got) >= len(bad))
    sources = dead_letter_sources(letters)
    assert sources == Counter(dict.fromkeys(bad, 1)), f"{context}: one dead letter per bad record"
    where_letters = {(letter.partition, letter.offset): letter for letter in letters}
    for partition, offset, reason, field_path, dlq_topic, dlq_partition, dlq_offset in rows:
        case, _, expected_reason, expected_path = bad[(partition, offset)]
        assert (reason, field_path) == (expected_reason, expected_path), f"{context}: {case}"
        assert dlq_topic == env["LEDGER_DLQ_TOPIC"], f"{context}: {case}"
        letter = where_letters[(dlq_partition, dlq_offset)]
        headers = {name: value.decode() for name, value in letter.headers}
        assert (
            int(headers["ledger.dlq.source.partition"]),
            int(headers["ledger.dlq.source.offset"]),
        ) == (partition, offset), f"{context}: {case}: the rejection names the wrong dead letter"

    code, report = ledger_json(database_url, "verify")
    assert code == 0, f"{context}: ledger verify failed: {report.get('problems')}"
