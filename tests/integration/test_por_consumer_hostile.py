"""Hostile PoR envelopes through the real consumer: each is a rejection plus a dead letter with its
specific reason code and path, and the genuine pack after them is still verified."""

from __future__ import annotations

import base64
import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.consumer import ROOT, consumer_env, publish_raw, read_topic, run_consumer
from tests.helpers.database import query

pytestmark = pytest.mark.integration

PACKS = ROOT / "tests" / "data" / "por_packs"
HEAD = {"schema_id": "cournot-ledger/por-envelope", "schema_version": 1}
DOCUMENT = json.loads((PACKS / "genuine" / "conflicting_sources_document.json").read_text(encoding="utf-8"))


def document_envelope(pack: dict[str, Any]) -> str:
    return json.dumps({**HEAD, "pack": pack})


def changed(edit: Any) -> bytes:
    pack = copy.deepcopy(DOCUMENT)
    edit(pack)
    return document_envelope(pack).encode("utf-8")


def with_price(literal: str) -> bytes:
    text = document_envelope(DOCUMENT)
    return re.sub(r'("price_usd": )[0-9.]+', lambda m: m.group(1) + literal, text, count=1).encode()


def long_market(pack: dict[str, Any]) -> None:
    pack["por_bundle"]["market_id"] = pack["por_bundle"]["verdict"]["market_id"] = "m" * 3000


def files_with(extra: dict[str, bytes]) -> bytes:
    pack = PACKS / "genuine" / "two_sources_agree"
    files = {p.relative_to(pack).as_posix(): p.read_bytes() for p in sorted(pack.rglob("*")) if p.is_file()}
    files.update(extra)
    encoded = {name: base64.b64encode(data).decode("ascii") for name, data in files.items()}
    return json.dumps({**HEAD, "files": encoded}).encode("utf-8")


def test_hostile_packs_are_dead_lettered_with_their_reason_and_the_consumer_moves_on(
    kafka_bootstrap: str, database_url: str, topic_name: str, tmp_path: Path
) -> None:
    hostile = [
        (changed(lambda p: p["prompt_spec"]["market"].__setitem__("question", "q\x00")), "unstorable_text"),
        (changed(long_market), "value_too_long"),
        (with_price("9" * 400), "number_too_large"),
        (with_price("1e400"), "non_finite_number"),
        (files_with({"a\x00.json": b"{}"}), "unstorable_text"),
    ]
    values = [value for value, _ in hostile] + [document_envelope(DOCUMENT).encode()]
    publish_raw(kafka_bootstrap, topic_name, values, key=b"mk_por")

    run_consumer(tmp_path, consumer_env(kafka_bootstrap, database_url, topic_name))

    rejected = query(
        database_url,
        "SELECT e.payload ->> 'reason_code' FROM ledger.entries e "
        "WHERE e.kind = 'submission.rejected' ORDER BY e.global_seq",
    )
    assert [row[0] for row in rejected] == [reason for _, reason in hostile]
    assert query(database_url, "SELECT status FROM ledger.por_verifications") == [("ok",)]
    dead = read_topic(kafka_bootstrap, f"{topic_name}.dlq", len(hostile))
    reasons = [dict(record.headers)["ledger.dlq.reason"].decode() for record in dead]
    assert reasons == [reason for _, reason in hostile]


def test_replay_por_names_a_pack_the_verifier_fails_on_as_a_divergence(database_url: str) -> None:
    import os
    import subprocess
    import sys
    from dataclasses import replace

    from consumers.por_envelope import decode_por_envelope, por_draft
    from ledger.migration import upgrade
    from ledger.store.ledger_store import LedgerStore

    upgrade(database_url)
    decoded = decode_por_envelope(document_envelope(DOCUMENT).encode())
    assert decoded is not None
    draft = por_draft(decoded, None)
    payload = json.loads(json.dumps(draft.entries[0].payload))
    # a pack stored before the number limits: 400 digits where the verifier needs a float
    item = payload["stored_pack"]["pack"]["evidence_bundle"]["items"][0]
    item["extracted_fields"]["price_usd"] = 10**400 - 1
    hostile = replace(draft, entries=[replace(draft.entries[0], payload=payload)])
    LedgerStore(database_url).append(hostile)

    replay = subprocess.run(
        [sys.executable, "-m", "cli", "replay-por", "--format", "json", "--database-url", database_url],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in replay.stderr, replay.stderr[-2000:]
    assert replay.returncode == 1
    first = json.loads(replay.stdout.splitlines()[0])
    assert first["identical"] is False and "OverflowError" in first["error"]
