"""Issue 6 end to end: publish the corpus, consume it, then replay and verify through the CLI.

The corpus goes through ``ledger publish`` and ``ledger consume --until-idle 3`` once per module
into a template database; each test works on its own copy (``CREATE DATABASE ... TEMPLATE``), so
tampering in one test never leaks into another. Every command is a fresh process with a timeout.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from engine.envelope import EnvelopeError, decode_envelope, wrap_inputs
from engine.sentinel import Challenge
from ledger.store.hashing import canonical_text, text_sha256
from tests.helpers.consumer import ledger_cli
from tests.helpers.database import query, rewrite_step, tamper
from tests.helpers.replay import ledger_json
from tests.helpers.services import PgServer, fresh_database

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 240.0
OTHER_PROCESS = {"PYTHONHASHSEED": "987", "TZ": "Australia/Lord_Howe", "LC_ALL": "C.UTF-8"}


def accepted_corpus() -> list[str]:
    """Corpus files ``ledger publish`` accepts (the corpus also holds deliberately bad bundles)."""
    files = []
    for path in sorted((ROOT / "samples" / "corpus").glob("*.json")):
        document = json.loads(path.read_bytes())
        try:
            decode_envelope(
                json.dumps(wrap_inputs(document["prompt_spec"], document["evidence_bundle"])).encode()
            )
        except EnvelopeError:
            continue
        files.append(str(path))
    return files


def cli_json(url: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """``ledger ARGS --format json`` against ``url`` within the end-to-end timeout."""
    return ledger_json(url, *args, env=env, timeout=TIMEOUT)


@pytest.fixture(scope="module")
def consumed(pg_server: PgServer, kafka_bootstrap: str) -> Iterator[tuple[str, int]]:
    """``(template database name, submissions)`` after publish + consume of the accepted corpus."""
    with fresh_database(pg_server.admin_url, prefix="replay_e2e") as url:
        yield _consume_corpus(url, kafka_bootstrap)


def _consume_corpus(url: str, kafka_bootstrap: str) -> tuple[str, int]:
    """Migrate the database at ``url``, publish + consume the accepted corpus; (name, submissions)."""
    topic = f"replay-e2e-{uuid.uuid4().hex[:12]}"
    env = {
        "LEDGER_DATABASE_URL": url,
        "LEDGER_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "LEDGER_TOPIC": topic,
        "LEDGER_DLQ_TOPIC": f"{topic}.dlq",
        "LEDGER_GROUP_ID": f"{topic}-group",
    }
    files = accepted_corpus()
    # the owner's step: ledger consume never migrates
    migrated = ledger_cli("migrate", env=env, timeout=TIMEOUT)
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    published = ledger_cli("publish", *files, env=env, timeout=TIMEOUT)
    assert published.returncode == 0, published.stderr[-3000:]
    consumed = ledger_cli(
        "consume",
        "--until-idle",
        "3",
        "--session-timeout-ms",
        "2000",
        "--heartbeat-interval-ms",
        "300",
        env=env,
        timeout=TIMEOUT,
    )
    assert consumed.returncode == 0, consumed.stderr[-3000:]
    [[count]] = query(url, "SELECT count(*) FROM ledger.submissions WHERE status = 'audited'")
    assert count == len(files), f"{count} audited submissions for {len(files)} published bundles"
    name = make_url(url).database
    assert name is not None
    return name, count


@pytest.fixture
def ledger_copy(pg_server: PgServer, consumed: tuple[str, int]) -> Iterator[str]:
    """A private copy of the consumed ledger."""
    with fresh_database(pg_server.admin_url, prefix="replay_e2e_copy", template=consumed[0]) as url:
        yield url


def test_consumed_corpus_replays_100_percent_identical_in_another_process_and_verifies(
    ledger_copy: str, consumed: tuple[str, int]
) -> None:
    code, report = cli_json(ledger_copy, "replay", "--all", env=OTHER_PROCESS)
    verify_code, verified = cli_json(ledger_copy, "verify")

    assert code == 0, report["results"]
    assert report["summary"]["identical"] == report["summary"]["submissions"] == consumed[1]
    assert report["summary"]["identical_percent"] == 100.0
    assert verify_code == 0 and verified["summary"]["errors"] == 0, verified["problems"]


def test_a_step_rewritten_by_the_superuser_is_named_by_verify_and_replay(ledger_copy: str) -> None:
    [(submission_id, step_index, step_id, text, old_hash)] = query(
        ledger_copy,
        "SELECT submission_id, step_index, step_id, canonical_step, step_hash FROM ledger_store.trace_steps "
        "ORDER BY global_seq OFFSET 40 LIMIT 1",
    )
    step = json.loads(text)
    step["action"] = "forged_action"
    forged = canonical_text(step)
    rewrite_step(ledger_copy, submission_id, step_index, forged, step_hash=text_sha256(forged))

    verify_code, verified = cli_json(ledger_copy, "verify", "--no-translog")
    replay_code, replayed = cli_json(ledger_copy, "replay", "--all")

    assert verify_code == 1
    [problem] = [p for p in verified["problems"] if p["severity"] == "error"]
    assert (problem["submission_id"], problem["step_index"], problem["step_id"]) == (
        submission_id,
        step_index,
        step_id,
    )
    challenge = Challenge.model_validate(problem["challenge"])
    assert challenge.kind == "reasoning_leaf" and challenge.leaf_index == step_index
    assert challenge.leaf_hash == text_sha256(forged) and challenge.details["stored_leaf_hash"] == old_hash
    assert challenge.merkle_proof is not None and challenge.merkle_proof.verify()
    assert replay_code == 1
    [result] = replayed["results"]
    assert (result["submission_id"], result["status"]) == (submission_id, "diverged")
    assert result["first_difference"]["step_index"] == step_index
    assert '-  "action": "forged_action",' in result["first_difference"]["diff"].splitlines()


def test_a_verdict_payload_rewritten_by_the_superuser_is_named_by_verify_and_replay(ledger_copy: str) -> None:
    [(global_seq, submission_id)] = query(
        ledger_copy,
        "SELECT global_seq, submission_id FROM ledger_store.entries WHERE kind = 'verdict.issued' "
        'AND payload_canonical LIKE \'%%"outcome":"YES"%%\' ORDER BY global_seq LIMIT 1',
    )
    tamper(
        ledger_copy,
        'UPDATE ledger_store.entries SET payload_canonical = replace(payload_canonical, \'"outcome":"YES"\', '
        '\'"outcome":"NO"\') WHERE global_seq = %(g)s',
        {"g": global_seq},
    )

    verify_code, verified = cli_json(ledger_copy, "verify", "--no-translog")
    replay_code, replayed = cli_json(ledger_copy, "replay", "--all")

    assert verify_code == 1
    errors = {p["code"]: p for p in verified["problems"] if p["severity"] == "error"}
    assert set(errors) == {"payload_hash_mismatch", "verdict_hash_mismatch"}
    assert errors["payload_hash_mismatch"]["global_seq"] == global_seq
    assert errors["verdict_hash_mismatch"]["challenge"]["kind"] == "verdict_hash"
    assert replay_code == 1
    [result] = replayed["results"]
    assert result["submission_id"] == submission_id and result["first_difference"]["component"] == "verdict"
    assert '-  "outcome": "NO",' in result["first_difference"]["diff"].splitlines()


def test_an_engine_version_rewritten_by_the_superuser_is_version_drift(ledger_copy: str) -> None:
    [[submission_id]] = query(
        ledger_copy, "SELECT submission_id FROM ledger_store.submissions ORDER BY 1 LIMIT 1"
    )
    for table in ("submissions", "entries"):
        tamper(
            ledger_copy,
            f"UPDATE ledger_store.{table} SET engine_version = '0.0.1-old' WHERE submission_id = %(s)s",
            {"s": submission_id},
        )

    code, report = cli_json(ledger_copy, "replay", "--all")

    assert code == 0, report["results"]
    assert report["summary"]["version_drift"] == 1 and report["summary"]["diverged"] == 0
    [result] = report["results"]
    assert (result["submission_id"], result["status"]) == (submission_id, "version_drift")
    assert result["recorded_engine_version"] == "0.0.1-old"
