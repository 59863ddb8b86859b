"""Every JSON endpoint of ``ledger serve`` against a real PostgreSQL, each proof checked independently."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.api.conftest import ORIGIN, ServedLedger, envelope_bytes
from tests.api.tlog_spec_client import (
    leaf_hash,
    open_checkpoint,
    verify_consistency,
    verify_inclusion,
)

pytestmark = pytest.mark.integration


def _unhex(value: str) -> bytes:
    assert value.startswith("0x") and len(value) == 66
    return bytes.fromhex(value[2:])


def test_submissions_are_listed_in_global_order_with_keyset_pages(served: ServedLedger) -> None:
    with served.client() as client:
        seen, after = [], 0
        while True:
            page = client.get("/v1/submissions", params={"after": after, "limit": 4}).json()
            seen += page["items"]
            if page["next_after"] is None:
                break
            after = page["next_after"]
        assert [item["submission_id"] for item in seen] == list(served.submissions.values())
        firsts = [item["first_seq"] for item in seen]
        assert firsts == sorted(firsts) and firsts[0] == 1
        rejected = client.get("/v1/submissions", params={"status": "rejected"}).json()["items"]
        assert [item["submission_id"] for item in rejected] == [served.submissions["rejected"]]
        market = client.get("/v1/submissions", params={"market_id": "bulk-market-1"}).json()["items"]
        assert [item["submission_id"] for item in market] == [
            served.submissions[f"bulk-{i}"] for i in (1, 3, 5, 7, 9)
        ]
        bad = client.get("/v1/submissions", params={"status": "pending"})
        assert bad.status_code == 422 and bad.headers["content-type"] == "application/problem+json"


def test_a_submission_shows_entries_steps_verdict_and_roots_that_hash_correctly(served: ServedLedger) -> None:
    submission_id = served.submissions["01_clean_threshold.json"]
    with served.client() as client:
        detail = client.get(f"/v1/submissions/{submission_id}").json()
    assert detail["submission"]["status"] == "audited" and detail["audit_ok"] is True
    kinds = [entry["kind"] for entry in detail["entries"]]
    assert kinds[0] == "submission.received" and kinds[-2:] == ["audit.completed", "verdict.issued"]
    for entry in detail["entries"]:  # the payload text is what payload_hash commits to
        assert "0x" + hashlib.sha256(entry["payload_canonical"].encode()).hexdigest() == entry["payload_hash"]
        assert json.loads(entry["payload_canonical"]) == entry["payload"]
    for step in detail["steps"]:
        assert "0x" + hashlib.sha256(step["canonical_step"].encode()).hexdigest() == step["step_hash"]
    assert detail["verdict"]["outcome"] in ("YES", "NO", "INVALID")
    assert detail["roots"]["reasoning_leaf_count"] == len(detail["steps"])
    with served.client() as client:
        missing = client.get("/v1/submissions/0x" + "0" * 64)
        assert missing.status_code == 404 and missing.json()["code"] == "not_found"
        rejected = client.get(f"/v1/submissions/{served.submissions['rejected']}").json()
        assert rejected["rejection"]["reason_code"] == "malformed_json" and rejected["steps"] == []


def _cournot_verify(leaf: bytes, index: int, siblings: list[bytes], root: bytes, count: int) -> bool:
    """Cournot proof check from its definition: parent = sha256(left || right), odd levels pad the last node."""
    if not 0 <= index < count or len(siblings) != (count - 1).bit_length():
        return False
    current, position, width = leaf, index, count
    for sibling in siblings:
        if position == width - 1 and width % 2 and sibling != current:
            return False
        pair = current + sibling if position % 2 == 0 else sibling + current
        current = hashlib.sha256(pair).digest()
        position, width = position // 2, (width + 1) // 2
    return current == root


def test_every_step_proof_verifies_against_the_committed_reasoning_root(served: ServedLedger) -> None:
    submission_id = served.submissions["02_two_sources_agree.json"]
    with served.client() as client:
        detail = client.get(f"/v1/submissions/{submission_id}").json()
        root = _unhex(detail["roots"]["reasoning_root"])
        count = detail["roots"]["reasoning_leaf_count"]
        for step in detail["steps"]:
            body = client.get(f"/v1/submissions/{submission_id}/steps/{step['step_index']}/proof").json()
            proof = body["proof"]
            assert proof["leaf"] == step["step_hash"] == body["step_hash"]
            siblings = [_unhex(s) for s in proof["siblings"]]
            assert _cournot_verify(_unhex(proof["leaf"]), proof["index"], siblings, root, count)
        beyond = client.get(f"/v1/submissions/{submission_id}/steps/{count}/proof")
        assert beyond.status_code == 404
        # the factory's bulk submissions commit to a placeholder reasoning root: refused, not proven
        fake = client.get(f"/v1/submissions/{served.submissions['bulk-0']}/steps/0/proof")
        assert fake.status_code == 409 and fake.json()["code"] == "steps_do_not_match_root"


def test_entry_inclusion_proofs_verify_against_the_signed_checkpoints(served: ServedLedger) -> None:
    first, latest = served.checkpoints
    with served.client() as client:
        for seq, size in [
            (1, None),
            (first.tree_size, first.tree_size),
            (latest.tree_size, None),
            (300, None),
        ]:
            params = {} if size is None else {"size": size}
            bundle = client.get(f"/v1/entries/{seq}/proof", params=params).json()
            checkpoint = open_checkpoint(bundle["checkpoint"].encode(), ORIGIN, served.public_key)
            assert checkpoint.size == bundle["tree_size"] == (size or latest.tree_size)
            entry = bundle["entry"]
            assert (
                "0x" + hashlib.sha256(entry["payload_canonical"].encode()).hexdigest()
                == entry["payload_hash"]
            )
            leaf = leaf_hash(_unhex(entry["entry_hash"]))
            path = [_unhex(node) for node in bundle["inclusion_path"]]
            assert verify_inclusion(leaf, seq - 1, checkpoint.size, path, checkpoint.root)
            assert not verify_inclusion(leaf, seq % checkpoint.size, checkpoint.size, path, checkpoint.root)
        assert client.get(f"/v1/entries/{latest.tree_size + 1}/proof").json()["code"] == "not_covered"
        assert client.get("/v1/entries/1/proof", params={"size": 2}).json()["code"] == "no_checkpoint"


def test_consistency_proofs_verify_between_the_checkpoints(served: ServedLedger) -> None:
    first, latest = served.checkpoints
    with served.client() as client:
        for old, new in [(first.tree_size, latest.tree_size), (1, latest.tree_size), (256, 300), (7, 7)]:
            bundle = client.get("/v1/consistency", params={"from": old, "to": new}).json()
            proof = [_unhex(node) for node in bundle["consistency_path"]]
            assert verify_consistency(old, new, _unhex(bundle["old_root"]), _unhex(bundle["new_root"]), proof)
        bundle = client.get(
            "/v1/consistency", params={"from": first.tree_size, "to": latest.tree_size}
        ).json()
        old_note = open_checkpoint(bundle["old_checkpoint"].encode(), ORIGIN, served.public_key)
        new_note = open_checkpoint(bundle["new_checkpoint"].encode(), ORIGIN, served.public_key)
        assert (old_note.root, new_note.root) == (_unhex(bundle["old_root"]), _unhex(bundle["new_root"]))
        assert client.get("/v1/consistency", params={"from": 5, "to": 2}).status_code == 400
        assert client.get("/v1/consistency", params={"from": 1, "to": 10**9}).status_code == 404


def test_latest_checkpoint_is_the_signed_note(served: ServedLedger) -> None:
    with served.client() as client:
        response = client.get("/v1/checkpoints/latest")
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == served.checkpoints[-1].note
    checkpoint = open_checkpoint(response.content, ORIGIN, served.public_key)
    assert checkpoint.size == served.checkpoints[-1].tree_size


def test_audit_is_a_dry_run_with_the_consumers_decoder(served: ServedLedger) -> None:
    with served.client() as client:
        before = client.get("/healthz").json()["tree_size"]
        raw = envelope_bytes("03_conflicting_sources.json")
        response = client.post("/v1/audit", content=raw, headers={"content-type": "application/json"})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["stored"] is False and body["idempotency_key"].startswith("inputs:")
        assert body["result"]["roots"]["reasoning_leaf_count"] == len(body["result"]["step_hashes"])
        assert client.get("/healthz").json()["tree_size"] == before  # nothing stored
        duplicate = raw.replace(b'"schema_version": 1', b'"schema_version": 1, "schema_version": 1', 1)
        refused = client.post("/v1/audit", content=duplicate, headers={"content-type": "application/json"})
        assert refused.status_code == 422 and refused.json()["code"] == "duplicate_key"
        wrong = client.post("/v1/audit", content=b"{}", headers={"content-type": "text/plain"})
        assert wrong.status_code == 415


def test_healthz_and_metrics(served: ServedLedger) -> None:
    with served.client(token=None) as open_client:
        health = open_client.get("/healthz").json()  # open without the token, for probes
    assert health == {
        "status": "ok",
        "tree_size": served.checkpoints[-1].tree_size,
        "checkpoint_size": served.checkpoints[-1].tree_size,
    }
    with served.client() as client:
        client.get("/v1/submissions")
        text = client.get("/metrics").text
    assert 'ledger_api_requests_total{method="GET",route="/v1/submissions",status="200"}' in text
