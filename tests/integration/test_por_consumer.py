"""PoR packs through Kafka: verified and recorded, bad packs dead-lettered, replay re-verifies identically."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.helpers.consumer import ROOT, consumer_env, publish_raw, read_topic, run_consumer
from tests.helpers.consumer import ledger_cli as ledger
from tests.helpers.database import query

pytestmark = pytest.mark.integration

PACKS = ROOT / "tests" / "data" / "por_packs"


def files_envelope(pack: Path, event_id: str) -> bytes:
    files = {
        path.relative_to(pack).as_posix(): base64.b64encode(path.read_bytes()).decode("ascii")
        for path in sorted(pack.rglob("*"))
        if path.is_file()
    }
    document = {"schema_id": "cournot-ledger/por-envelope", "schema_version": 1, "event_id": event_id}
    return json.dumps({**document, "files": files}).encode("utf-8")


def document_envelope(pack: dict[str, object]) -> bytes:
    return json.dumps(
        {"schema_id": "cournot-ledger/por-envelope", "schema_version": 1, "pack": pack}
    ).encode()


def test_packs_are_verified_recorded_rejected_and_replayed(
    kafka_bootstrap: str, database_url: str, topic_name: str, tmp_path: Path
) -> None:
    document = json.loads(
        (PACKS / "genuine" / "conflicting_sources_document.json").read_text(encoding="utf-8")
    )
    broken = json.loads(json.dumps(document))
    del broken["reasoning_trace"]["steps"][0]["step_type"]
    values = [
        files_envelope(PACKS / "genuine" / "two_sources_agree", "genuine-1"),
        files_envelope(PACKS / "mutated" / "steps_reordered", "reordered-1"),
        document_envelope(document),
        document_envelope(broken),  # a bad pack: refused like a bad bundle
        b'{"schema_id": "cournot-ledger/por-envelope", "schema_version": 2, "pack": {}}',
    ]
    publish_raw(kafka_bootstrap, topic_name, values, key=b"mk_por")
    publish_raw(kafka_bootstrap, topic_name, values[:1], key=b"mk_por")  # a re-delivered duplicate
    env = consumer_env(kafka_bootstrap, database_url, topic_name)

    run_consumer(tmp_path, env)

    rows = query(
        database_url,
        "SELECT idempotency_key, status, failed_checks, challenge_count FROM ledger.por_verifications "
        "ORDER BY global_seq",
    )
    assert [(row[0].split(":")[0], row[1]) for row in rows] == [
        ("event", "ok"),
        ("event", "failed"),
        ("por", "ok"),
    ]
    assert "root.reasoning_root" in rows[1][2] and rows[1][3] == 1
    rejected = query(
        database_url,
        "SELECT e.payload ->> 'reason_code', e.payload ->> 'field_path' FROM ledger.entries e "
        "WHERE e.kind = 'submission.rejected' ORDER BY e.global_seq",
    )
    assert rejected == [
        ("schema_violation", "$.pack.reasoning_trace.steps[0].step_type"),
        ("unknown_envelope_version", "$.schema_version"),
    ]
    dead = read_topic(kafka_bootstrap, f"{topic_name}.dlq", 2)
    assert len(dead) == 2

    verify = ledger("verify", "--database-url", database_url, env=env)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    replay = ledger("replay-por", "--format", "json", "--database-url", database_url, env=env)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    lines = [json.loads(line) for line in replay.stdout.splitlines()]
    assert [line["identical"] for line in lines[:-1]] == [True, True, True]
    assert lines[-1] == {"diverged": 0, "identical": 3}
