"""Issue 6: ``ledger verify`` recomputes every hash from stored bytes and names what is broken.

Every tampering here runs as the database superuser with the append-only triggers bypassed.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from engine.sentinel import Challenge
from ledger.store.hashing import canonical_text, entry_hash, text_sha256
from tests.helpers.database import query, rewrite_step, tamper
from tests.helpers.replay import build_ledger, ledger, ledger_json, problems

pytestmark = pytest.mark.integration


def step(url: str, submission_id: str, step_index: int) -> dict[str, object]:
    """One stored step row as a dict."""
    [row] = query(
        url,
        "SELECT canonical_step, step_hash, step_id, global_seq FROM ledger_store.trace_steps "
        "WHERE submission_id = %(s)s AND step_index = %(i)s",
        {"s": submission_id, "i": step_index},
    )
    return dict(zip(("text", "step_hash", "step_id", "global_seq"), row, strict=True))


def claimed_por_root(url: str, submission_id: str) -> str:
    [[por_root]] = query(
        url, "SELECT por_root FROM ledger.verdicts WHERE submission_id = %(s)s", {"s": submission_id}
    )
    return str(por_root)


def altered_step_text(text: str) -> str:
    value = json.loads(text)
    value["action"] = f"{value['action']}_tampered"
    return canonical_text(value)


def assert_pinpointed(
    report: dict[str, object], code: str, submission_id: str, index: int, row: dict[str, object], url: str
) -> Challenge:
    [problem] = problems(report)
    assert problem["code"] == code
    assert problem["submission_id"] == submission_id
    assert (problem["step_index"], problem["leaf_index"]) == (index, index)
    assert problem["step_id"] == row["step_id"] and problem["global_seq"] == row["global_seq"]
    challenge = Challenge.model_validate(problem["challenge"])
    assert challenge.kind == "reasoning_leaf" and challenge.leaf_index == index
    assert challenge.bundle_root == claimed_por_root(url, submission_id)
    assert challenge.details["stored_leaf_hash"] == row["step_hash"]
    assert challenge.id_is_valid()
    proof = challenge.merkle_proof
    assert proof is not None and proof.tree == "reasoning" and proof.index == index and proof.verify()
    assert proof.leaf == challenge.leaf_hash and proof.root == challenge.component_root
    return challenge


def test_an_intact_ledger_verifies_and_exits_0(migrated_database_url: str) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=8)
    [[entries]] = query(url, "SELECT count(*) FROM ledger_store.entries")

    code, report = ledger_json(url, "verify")
    text = ledger(url, "verify")

    assert code == 0, report["problems"]
    assert report["ok"] and problems(report) == []
    summary = report["summary"]
    assert (summary["submissions"], summary["entries"]) == (8, entries)
    assert summary["steps"] == sum(item.steps for item in stored)
    assert summary["translog_checked"] is True
    assert {p["code"] for p in report["problems"]} <= {
        "translog.signatures_unchecked",
        "translog.tree_behind",
    }
    assert text.returncode == 0 and "result: OK (0 error(s)" in text.stdout


def test_a_rewritten_canonical_step_is_named_by_submission_step_and_leaf_with_a_merkle_proof(
    migrated_database_url: str,
) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=5)
    target, index = stored[3].submission_id, 2
    row = step(url, target, index)
    new_text = altered_step_text(str(row["text"]))
    rewrite_step(url, target, index, new_text)

    code, report = ledger_json(url, "verify", "--no-translog")

    assert code == 1 and not report["ok"]
    challenge = assert_pinpointed(report, "step_hash_mismatch", target, index, row, url)
    assert challenge.leaf_hash == text_sha256(new_text)


def test_a_step_rewritten_with_a_matching_step_hash_is_caught_by_its_committed_entry(
    migrated_database_url: str,
) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=4)
    target, index = stored[1].submission_id, 0
    row = step(url, target, index)
    new_text = altered_step_text(str(row["text"]))
    rewrite_step(url, target, index, new_text, step_hash=text_sha256(new_text))

    code, report = ledger_json(url, "verify", "--no-translog")
    replay_code, replayed = ledger_json(url, "replay", "--submission", target)

    assert code == 1
    assert_pinpointed(report, "step_not_committed", target, index, row, url)
    assert replay_code == 1
    [result] = replayed["results"]
    assert result["differing"] == ["steps", "step_hashes"]
    assert result["first_difference"]["step_index"] == index


def test_a_tampered_verdict_payload_breaks_its_payload_hash_and_the_verdict_hash(
    migrated_database_url: str,
) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=3)
    target = stored[0].submission_id
    [[verdict_seq]] = query(
        url,
        "SELECT global_seq FROM ledger_store.entries WHERE submission_id = %(s)s AND kind = 'verdict.issued'",
        {"s": target},
    )
    tamper(
        url,
        'UPDATE ledger_store.entries SET payload_canonical = replace(payload_canonical, \'"outcome":"YES"\', '
        '\'"outcome":"NO"\') WHERE global_seq = %(g)s',
        {"g": verdict_seq},
    )

    code, report = ledger_json(url, "verify", "--no-translog")

    assert code == 1
    found = {p["code"]: p for p in problems(report)}
    assert set(found) == {"payload_hash_mismatch", "verdict_hash_mismatch"}
    payload = found["payload_hash_mismatch"]
    assert (payload["submission_id"], payload["global_seq"], payload["entry_kind"]) == (
        target,
        verdict_seq,
        "verdict.issued",
    )
    challenge = Challenge.model_validate(found["verdict_hash_mismatch"]["challenge"])
    assert challenge.kind == "verdict_hash" and challenge.bundle_root == claimed_por_root(url, target)
    assert challenge.merkle_proof is not None and challenge.merkle_proof.tree == "por"
    assert challenge.merkle_proof.index == 3 and challenge.merkle_proof.verify()


def test_a_tampered_evidence_item_is_an_evidence_root_challenge(migrated_database_url: str) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=2)
    target = stored[1].submission_id
    tamper(
        url,
        "UPDATE ledger_store.entries SET payload_canonical = replace(payload_canonical, '\"status_code\":200', "
        "'\"status_code\":201') WHERE submission_id = %(s)s AND kind = 'submission.received'",
        {"s": target},
    )

    code, report = ledger_json(url, "verify", "--no-translog")

    assert code == 1
    found = {p["code"]: p for p in problems(report)}
    assert set(found) == {"payload_hash_mismatch", "evidence_root_mismatch"}
    evidence = found["evidence_root_mismatch"]
    assert evidence["submission_id"] == target
    assert set(evidence["details"]["claimed"]) == {"roots", "submission.received", "input_hashes", "verdict"}
    challenge = Challenge.model_validate(evidence["challenge"])
    assert challenge.kind == "evidence_leaf" and challenge.component_root == evidence["details"]["recomputed"]
    assert (
        challenge.merkle_proof is not None
        and challenge.merkle_proof.index == 1
        and challenge.merkle_proof.verify()
    )


def test_evidence_items_in_the_verdict_payload_do_not_stand_in_for_the_received_ones(
    migrated_database_url: str,
) -> None:
    """The evidence root is recomputed from the ``submission.received`` items even when a tampered
    ``verdict.issued`` payload carries an ``evidence_bundle`` holding the original items."""
    url = migrated_database_url
    stored = build_ledger(url, limit=2)
    target = stored[1].submission_id
    [[received_text]] = query(
        url,
        "SELECT payload_canonical FROM ledger_store.entries WHERE submission_id = %(s)s "
        "AND kind = 'submission.received'",
        {"s": target},
    )
    original_bundle = canonical_text(json.loads(received_text)["evidence_bundle"])
    tamper(
        url,
        "UPDATE ledger_store.entries SET payload_canonical = replace(payload_canonical, '\"status_code\":200', "
        "'\"status_code\":201') WHERE submission_id = %(s)s AND kind = 'submission.received'",
        {"s": target},
    )
    tamper(  # "evidence_bundle" sorts first: the text stays canonical
        url,
        "UPDATE ledger_store.entries SET payload_canonical = '{\"evidence_bundle\":' || %(b)s || ',' "
        "|| substr(payload_canonical, 2) WHERE submission_id = %(s)s AND kind = 'verdict.issued'",
        {"s": target, "b": original_bundle},
    )

    code, report = ledger_json(url, "verify", "--no-translog")

    assert code == 1
    found = {p["code"]: p for p in problems(report)}
    assert "evidence_root_mismatch" in found, sorted(found)
    assert found["evidence_root_mismatch"]["submission_id"] == target


def test_a_deleted_entry_breaks_the_global_sequence_and_its_chain(migrated_database_url: str) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=3)
    target = stored[1].submission_id
    [[audit_seq]] = query(
        url,
        "SELECT global_seq FROM ledger_store.entries WHERE submission_id = %(s)s AND kind = 'audit.completed'",
        {"s": target},
    )
    tamper(url, "DELETE FROM ledger_store.entries WHERE global_seq = %(g)s", {"g": audit_seq})

    code, report = ledger_json(url, "verify", "--no-translog")

    assert code == 1
    by_code = {p["code"]: p for p in problems(report)}
    assert {"global_seq_gap", "stream_seq_gap", "chain_broken", "entries_missing"} <= set(by_code)
    assert by_code["global_seq_gap"]["global_seq"] == audit_seq
    assert by_code["chain_broken"]["submission_id"] == target
    assert by_code["chain_broken"]["entry_kind"] == "verdict.issued"


def test_a_consistently_rewritten_entry_is_still_caught_by_the_signed_checkpoint(
    migrated_database_url: str, tmp_path: Path
) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=2)
    key = tmp_path / "log.key"
    assert ledger(url, "keygen", "--out", str(key)).returncode == 0
    signed = ledger(url, "checkpoint", "--key", str(key))
    assert signed.returncode == 0, signed.stderr
    target = stored[1].submission_id
    [(seq, stream_seq, text, prev_hash, version)] = query(
        url,
        "SELECT global_seq, stream_seq, payload_canonical, prev_hash, engine_version FROM ledger_store.entries "
        "WHERE submission_id = %(s)s AND kind = 'verdict.issued'",
        {"s": target},
    )
    forged = re.sub(r'"outcome":"[A-Z]+"', '"outcome":"FORGED"', text, count=1)
    assert forged != text
    forged_payload_hash = "0x" + hashlib.sha256(forged.encode()).hexdigest()
    tamper(
        url,
        "UPDATE ledger_store.entries SET payload_canonical = %(t)s, payload_hash = %(p)s, entry_hash = %(e)s "
        "WHERE global_seq = %(g)s",
        {
            "t": forged,
            "p": forged_payload_hash,
            "e": entry_hash(target, stream_seq, "verdict.issued", forged_payload_hash, prev_hash, version),
            "g": seq,
        },
    )

    code, report = ledger_json(url, "verify", "--public-key", f"{key}.pub")

    assert code == 1
    translog = [p for p in problems(report) if p["source"] == "translog"]
    assert translog and any(p.get("global_seq") == seq and p.get("submission_id") == target for p in translog)
    assert "translog.signatures_unchecked" not in {p["code"] for p in report["problems"]}
    assert {p["code"] for p in problems(report) if p["source"] == "ledger"} == {"verdict_hash_mismatch"}


def test_worker_processes_report_the_same_problems_as_inline_verify(migrated_database_url: str) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=12)
    for item in (stored[2], stored[9]):
        row = step(url, item.submission_id, 1)
        rewrite_step(url, item.submission_id, 1, altered_step_text(str(row["text"])))

    inline_code, inline = ledger_json(url, "verify", "--no-translog", "--jobs", "1")
    workers_code, workers = ledger_json(url, "verify", "--no-translog", "--jobs", "2")

    assert inline_code == workers_code == 1
    assert workers["summary"]["jobs"] == 2
    key = lambda p: (p["code"], p["submission_id"], p.get("step_index"))  # noqa: E731
    assert sorted(map(key, problems(workers))) == sorted(map(key, problems(inline)))
    assert len(problems(inline)) == 2
    assert workers["summary"]["steps"] == inline["summary"]["steps"] == sum(item.steps for item in stored)
