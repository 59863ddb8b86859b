"""Issue 5: publish N bundles, consume, and the ledger holds exactly N submissions; re-delivery adds nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.consumer import (
    assert_ledger_exact,
    consumer_env,
    ledger_cli,
    make_inputs,
    publish,
    run_consumer,
    stored_offsets,
)
from tests.helpers.database import query

pytestmark = pytest.mark.integration


def test_n_published_bundles_become_exactly_n_submissions_with_their_steps(
    kafka_bootstrap: str, database_url: str, topic_name: str, tmp_path: Path
) -> None:
    documents = [make_inputs(index) for index in range(60)]
    publish(kafka_bootstrap, topic_name, documents)
    env = consumer_env(kafka_bootstrap, database_url, topic_name)

    run_consumer(tmp_path, env)

    assert_ledger_exact(database_url, {doc["evidence_bundle"]["bundle_id"] for doc in documents})
    kinds = dict(query(database_url, "SELECT kind, count(*) FROM ledger.entries GROUP BY kind"))
    assert kinds["submission.received"] == kinds["audit.completed"] == kinds["verdict.issued"] == 60
    assert sum(stored_offsets(database_url, f"{topic_name}-group", topic_name).values()) == 60
    health = ledger_cli("health", "--format", "json", env=env)
    report = json.loads(health.stdout)
    assert health.returncode == 0, health.stdout + health.stderr
    assert report["ok"] and report["total_lag"] == 0
    assert sum(row["highwater"] for row in report["partitions"]) == 60


def test_ledger_publish_command_validates_prints_and_sends(
    kafka_bootstrap: str, database_url: str, topic_name: str, tmp_path: Path
) -> None:
    files = []
    for index in range(3):
        path = tmp_path / f"bundle{index}.json"
        path.write_text(json.dumps(make_inputs(index)))
        files.append(str(path))
    env = consumer_env(kafka_bootstrap, database_url, topic_name)

    sent = ledger_cli("publish", "--format", "json", *files, env=env)

    assert sent.returncode == 0, sent.stderr
    lines = [json.loads(line) for line in sent.stdout.splitlines()]
    assert [line["source"] for line in lines] == files
    assert all(
        line["topic"] == topic_name and line["idempotency_key"].startswith("inputs:") for line in lines
    )
    bad = tmp_path / "bad.json"
    doc = make_inputs(9)
    doc["evidence_bundle"]["market_id"] = "elsewhere"
    bad.write_text(json.dumps(doc))
    refused = ledger_cli("publish", files[0], str(bad), env=env)
    assert refused.returncode == 1
    assert "market_mismatch" in refused.stderr and "nothing sent" in refused.stderr
    run_consumer(tmp_path, env)
    assert_ledger_exact(database_url, {f"bundle_{index:06d}" for index in range(3)})


def test_redelivery_and_republished_duplicates_add_nothing(
    kafka_bootstrap: str, database_url: str, topic_name: str, tmp_path: Path
) -> None:
    documents = [make_inputs(index) for index in range(30)]
    publish(kafka_bootstrap, topic_name, documents)
    env = consumer_env(kafka_bootstrap, database_url, topic_name)
    run_consumer(tmp_path, env, name="first")
    before = query(database_url, "SELECT count(*), max(global_seq) FROM ledger.entries")

    # the producer retries: the same bundles again, twice for some
    publish(kafka_bootstrap, topic_name, documents + documents[:10])
    again = run_consumer(tmp_path, env, name="duplicates")
    # offsets reset: a new group re-reads the topic from the beginning
    run_consumer(tmp_path, {**env, "LEDGER_GROUP_ID": f"{topic_name}-reset"}, name="reset")

    assert query(database_url, "SELECT count(*), max(global_seq) FROM ledger.entries") == before
    assert_ledger_exact(database_url, {doc["evidence_bundle"]["bundle_id"] for doc in documents})
    committed = again.events("batch committed")
    assert sum(line["existing"] for line in committed) == 40
    assert sum(line["new"] for line in committed) == 0
