"""The independent verifier: a valid log passes; a corpus of mutated proofs, checkpoints and
entries is rejected, each with a message saying what failed; malformed input never raises."""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.merkle.rfc6962 import consistency_proof, inclusion_proof, root_from_leaf_hashes
from ledger.store.hashing import GENESIS_PREV_HASH, chain_hashes, entry_hash, payload_hash
from ledger.translog.audit import LogAuditor
from ledger.translog.bundles import consistency_bundle, inclusion_bundle
from ledger.translog.leaves import entry_leaf_hash
from ledger.translog.note import Checkpoint, sign_checkpoint

KEY = Ed25519PrivateKey.from_private_bytes(b"\x07" * 32)
WRONG_KEY = Ed25519PrivateKey.from_private_bytes(b"\x08" * 32)
ORIGIN = "test.example/ledger"
SIZES = (1, 5, 8, 13)


def _entries(count: int) -> list[dict[str, Any]]:
    """``count`` entries in three submissions, with correct chain hashes."""
    out: list[dict[str, Any]] = []
    per_stream: dict[str, list[tuple[str, str, str]]] = {}
    plan = []
    for position in range(count):
        stream = "0x" + hashlib.sha256(f"submission {position % 3}".encode()).hexdigest()
        payload = json.dumps({"n": position}, separators=(",", ":"))
        per_stream.setdefault(stream, []).append(("trace.step", payload_hash(payload), "engine-1"))
        plan.append((stream, payload, len(per_stream[stream])))
    chained = {stream: chain_hashes(stream, links) for stream, links in per_stream.items()}
    for position, (stream, payload, stream_seq) in enumerate(plan, start=1):
        seq, prev, chained_hash = chained[stream][stream_seq - 1]
        out.append(
            {
                "global_seq": position,
                "submission_id": stream,
                "stream_seq": seq,
                "kind": "trace.step",
                "payload_hash": payload_hash(payload),
                "prev_hash": prev,
                "entry_hash": chained_hash,
                "engine_version": "engine-1",
                "payload_canonical": payload,
            }
        )
    assert out[0]["prev_hash"] == GENESIS_PREV_HASH
    return out


ENTRIES = _entries(max(SIZES))
LEAVES = [entry_leaf_hash(entry["entry_hash"]) for entry in ENTRIES]


def _note(size: int, key: Ed25519PrivateKey = KEY, root: bytes | None = None) -> str:
    root = root if root is not None else root_from_leaf_hashes(LEAVES[:size])
    return sign_checkpoint(Checkpoint(ORIGIN, size, root, "2026-11-21T12:00:00Z"), key)


def _inclusion(index: int, size: int) -> dict[str, Any]:
    root = root_from_leaf_hashes(LEAVES[:size])
    path = inclusion_proof(LEAVES[:size], index)
    return inclusion_bundle(ENTRIES[index], index, LEAVES[index], size, path, root, _note(size))


def _consistency(old: int, new: int) -> dict[str, Any]:
    return consistency_bundle(
        old,
        new,
        root_from_leaf_hashes(LEAVES[:old]),
        root_from_leaf_hashes(LEAVES[:new]),
        consistency_proof(LEAVES, old, new),
        _note(old) if old else None,
        _note(new),
    )


def _auditor() -> LogAuditor:
    auditor = LogAuditor(KEY.public_key())
    for size in SIZES:
        auditor.add_checkpoint(f"checkpoint {size}", _note(size))
    return auditor


def _entries_lines(entries: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(entry) for entry in entries]


def test_a_consistent_log_with_proofs_passes() -> None:
    auditor = _auditor()
    for size in SIZES:
        for index in range(size):
            auditor.check_bundle(f"inclusion {index}/{size}", _inclusion(index, size))
    for old, new in itertools.pairwise(SIZES):
        auditor.check_bundle(f"consistency {old}->{new}", _consistency(old, new))
    auditor.check_history()
    assert auditor.report.ok, auditor.report.render()


def test_exported_entries_alone_prove_the_history() -> None:
    auditor = _auditor()
    auditor.check_entries("entries.jsonl", _entries_lines(ENTRIES))
    auditor.check_history()
    assert auditor.report.ok, auditor.report.render()


def _flip(hex_hash: str, bit: int = 0) -> str:
    raw = bytearray(bytes.fromhex(hex_hash[2:]))
    raw[bit // 8] ^= 1 << (bit % 8)
    return "0x" + raw.hex()


def _inclusion_mutations() -> dict[str, dict[str, Any]]:
    base = _inclusion(5, 13)
    out: dict[str, dict[str, Any]] = {}

    def mutate(name: str, change: Any) -> None:
        bundle = copy.deepcopy(base)
        change(bundle)
        out[name] = bundle

    for position in range(len(base["inclusion_path"])):
        for bit in (0, 255):
            mutate(
                f"path[{position}] bit {bit}",
                lambda b, p=position, x=bit: b["inclusion_path"].__setitem__(
                    p, _flip(b["inclusion_path"][p], x)
                ),
            )
    mutate("leaf hash bit", lambda b: b.__setitem__("leaf_hash", _flip(b["leaf_hash"])))
    mutate("root bit", lambda b: b.__setitem__("root_hash", _flip(b["root_hash"])))
    mutate("index +1", lambda b: b.__setitem__("leaf_index", 6))
    mutate("index -1", lambda b: b.__setitem__("leaf_index", 4))
    mutate(
        "index and global_seq +1",
        lambda b: (b.__setitem__("leaf_index", 6), b["entry"].__setitem__("global_seq", 7)),
    )
    mutate("index xor 2", lambda b: b.__setitem__("leaf_index", 5 ^ 2))
    mutate("size x2", lambda b: b.__setitem__("tree_size", 26))
    mutate("size /2", lambda b: b.__setitem__("tree_size", 6))
    mutate("size +1", lambda b: b.__setitem__("tree_size", 14))
    mutate("path truncated", lambda b: b["inclusion_path"].pop())
    mutate("path extended", lambda b: b["inclusion_path"].append(b["inclusion_path"][0]))
    mutate("path prepended", lambda b: b["inclusion_path"].insert(0, b["leaf_hash"]))
    mutate("path reversed", lambda b: b["inclusion_path"].reverse())
    mutate("path empty", lambda b: b.__setitem__("inclusion_path", []))
    mutate("entry kind changed", lambda b: b["entry"].__setitem__("kind", "verdict.issued"))
    mutate("entry payload changed", lambda b: b["entry"].__setitem__("payload_canonical", '{"n":6}'))
    mutate(
        "entry hash changed", lambda b: b["entry"].__setitem__("entry_hash", _flip(b["entry"]["entry_hash"]))
    )
    mutate("entry swapped with another", lambda b: b.__setitem__("entry", dict(ENTRIES[6], global_seq=6)))
    mutate("checkpoint wrong key", lambda b: b.__setitem__("checkpoint", _note(13, WRONG_KEY)))
    mutate("checkpoint of another size", lambda b: b.__setitem__("checkpoint", _note(8)))
    mutate(
        "checkpoint missing, size unsigned",
        lambda b: (b.__setitem__("checkpoint", None), b.__setitem__("tree_size", 12)),
    )
    mutate("checkpoint garbage", lambda b: b.__setitem__("checkpoint", "garbage"))
    mutate("checkpoint not text", lambda b: b.__setitem__("checkpoint", 5))
    mutate("index is a string", lambda b: b.__setitem__("leaf_index", "5"))
    mutate("index is a bool", lambda b: b.__setitem__("leaf_index", True))
    mutate("index negative", lambda b: b.__setitem__("leaf_index", -1))
    mutate("size huge", lambda b: b.__setitem__("tree_size", 2**80))
    mutate("path not a list", lambda b: b.__setitem__("inclusion_path", "0x00"))
    mutate("path uppercase hex", lambda b: b["inclusion_path"].__setitem__(0, b["inclusion_path"][0].upper()))
    mutate("entry missing", lambda b: b.pop("entry"))
    mutate("entry not an object", lambda b: b.__setitem__("entry", [1, 2]))
    mutate("format unknown", lambda b: b.__setitem__("format", "something/else"))
    return out


INCLUSION_MUTATIONS = _inclusion_mutations()


@pytest.mark.parametrize("name", sorted(INCLUSION_MUTATIONS))
def test_mutated_inclusion_proofs_are_rejected(name: str) -> None:
    auditor = LogAuditor(KEY.public_key())
    auditor.check_bundle(name, INCLUSION_MUTATIONS[name])
    assert auditor.report.failures, f"{name} was accepted"
    assert all(f.message for f in auditor.report.failures)


def _consistency_mutations() -> dict[str, dict[str, Any]]:
    base = _consistency(5, 13)
    out: dict[str, dict[str, Any]] = {}

    def mutate(name: str, change: Any) -> None:
        bundle = copy.deepcopy(base)
        change(bundle)
        out[name] = bundle

    for position in range(len(base["consistency_path"])):
        mutate(
            f"path[{position}] bit",
            lambda b, p=position: b["consistency_path"].__setitem__(p, _flip(b["consistency_path"][p], 7)),
        )
    mutate("old size +1", lambda b: b.__setitem__("old_size", 6))
    mutate("old size -1", lambda b: b.__setitem__("old_size", 4))
    mutate("new size x2", lambda b: b.__setitem__("new_size", 26))
    mutate("new size /2", lambda b: b.__setitem__("new_size", 6))
    mutate("old root bit", lambda b: b.__setitem__("old_root", _flip(b["old_root"])))
    mutate("new root bit", lambda b: b.__setitem__("new_root", _flip(b["new_root"])))
    mutate(
        "roots swapped",
        lambda b: (b.__setitem__("old_root", base["new_root"]), b.__setitem__("new_root", base["old_root"])),
    )
    mutate("sizes swapped", lambda b: (b.__setitem__("old_size", 13), b.__setitem__("new_size", 5)))
    mutate("path truncated", lambda b: b["consistency_path"].pop())
    mutate("path extended", lambda b: b["consistency_path"].append(b["old_root"]))
    mutate("path reordered", lambda b: b["consistency_path"].reverse())
    mutate("path empty", lambda b: b.__setitem__("consistency_path", []))
    mutate("new checkpoint wrong key", lambda b: b.__setitem__("new_checkpoint", _note(13, WRONG_KEY)))
    mutate("old checkpoint of another size", lambda b: b.__setitem__("old_checkpoint", _note(8)))
    mutate(
        "checkpoints dropped",
        lambda b: (b.__setitem__("old_checkpoint", None), b.__setitem__("new_checkpoint", None)),
    )
    mutate(
        "forged fork",
        lambda b: (
            b.__setitem__("new_checkpoint", _note(13, root=b"\x11" * 32)),
            b.__setitem__("new_root", "0x" + "11" * 32),
        ),
    )
    return out


CONSISTENCY_MUTATIONS = _consistency_mutations()


@pytest.mark.parametrize("name", sorted(CONSISTENCY_MUTATIONS))
def test_mutated_consistency_proofs_are_rejected(name: str) -> None:
    auditor = LogAuditor(KEY.public_key())
    auditor.check_bundle(name, CONSISTENCY_MUTATIONS[name])
    assert auditor.report.failures, f"{name} was accepted"


def _swap(entries: list[dict[str, Any]], a: int, b: int) -> list[dict[str, Any]]:
    out = copy.deepcopy(entries)
    out[a], out[b] = out[b], out[a]
    out[a]["global_seq"], out[b]["global_seq"] = a + 1, b + 1
    return out


def _rewritten(entry: dict[str, Any]) -> dict[str, Any]:
    """What a database superuser would write: new payload, and hashes recomputed to match."""
    payload = '{"n":99}'
    fields = (entry["submission_id"], entry["stream_seq"], entry["kind"], payload_hash(payload))
    new_hash = entry_hash(*fields, entry["prev_hash"], entry["engine_version"])
    return dict(entry, payload_canonical=payload, payload_hash=payload_hash(payload), entry_hash=new_hash)


ENTRY_MUTATIONS = {
    "reordered entries": _swap(ENTRIES, 6, 9),
    "entry dropped": ENTRIES[:6] + ENTRIES[7:],
    "entries truncated": ENTRIES[:10],
    "entry payload rewritten with matching hashes": [*ENTRIES[:7], _rewritten(ENTRIES[7]), *ENTRIES[8:]],
    "entry hash flipped": [
        *ENTRIES[:3],
        dict(ENTRIES[3], entry_hash=_flip(ENTRIES[3]["entry_hash"])),
        *ENTRIES[4:],
    ],
}


@pytest.mark.parametrize("name", sorted(ENTRY_MUTATIONS))
def test_mutated_exported_entries_are_rejected(name: str) -> None:
    auditor = _auditor()
    auditor.check_entries(name, _entries_lines(ENTRY_MUTATIONS[name]))
    auditor.check_history()
    assert auditor.report.failures, f"{name} was accepted"


def test_a_reordering_is_located_between_the_last_good_and_first_bad_checkpoint() -> None:
    auditor = _auditor()
    auditor.check_entries("entries.jsonl", _entries_lines(_swap(ENTRIES, 6, 9)))
    (failure, *_) = auditor.report.failures
    assert "checkpoint of size 8" in failure.message and "global_seq in 6..8" in failure.message


def test_a_split_view_is_reported() -> None:
    auditor = _auditor()
    auditor.add_checkpoint("forked", _note(8, root=b"\x22" * 32))
    assert any("split view" in f.message for f in auditor.report.failures)


def test_checkpoints_without_proofs_between_them_fail_the_history_check() -> None:
    auditor = _auditor()
    auditor.check_bundle("5->8", _consistency(5, 8))
    auditor.check_bundle("8->13", _consistency(8, 13))
    auditor.check_history()
    (failure,) = auditor.report.failures
    assert failure.subject == "history" and "size(s) 1 " in failure.message


def test_consistency_proofs_chain_up_to_the_newest_checkpoint() -> None:
    auditor = _auditor()
    for old, new in ((1, 13), (5, 13), (8, 13)):
        auditor.check_bundle(f"{old}->{new}", _consistency(old, new))
    auditor.check_history()
    assert auditor.report.ok, auditor.report.render()


def test_nothing_to_check_is_a_failure() -> None:
    auditor = LogAuditor(KEY.public_key())
    auditor.check_history()
    assert not auditor.report.ok


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(_inclusion(0, 1))), json_values, max_size=8), st.booleans())
def test_malformed_bundles_fail_cleanly_and_never_raise(bundle: dict[str, Any], consistency: bool) -> None:
    bundle["format"] = (
        "cournot-ledger/consistency-proof/v1" if consistency else "cournot-ledger/inclusion-proof/v1"
    )
    auditor = LogAuditor(KEY.public_key())
    auditor.check_bundle("fuzz", bundle)
    auditor.check_entries("fuzz lines", [json.dumps(bundle), "not json", "[]"])
    assert not auditor.report.ok


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=60), max_size=5))
def test_garbage_entry_lines_fail_cleanly(lines: list[bytes]) -> None:
    auditor = _auditor()
    auditor.check_entries("garbage", lines)
    auditor.check_history()
    assert not auditor.report.ok


# -- locating a consistent rewrite offline: proven nodes narrow it to the first bad leaf -----------


def _rewritten(position: int) -> list[dict[str, Any]]:
    """ENTRIES with the payload at ``position`` (0-based) changed and every hash recomputed."""
    rewritten = copy.deepcopy(ENTRIES)
    previous: dict[str, str] = {}
    for index, entry in enumerate(rewritten):
        if index == position:
            entry["payload_canonical"] = json.dumps({"n": index, "rewritten": True}, separators=(",", ":"))
            entry["payload_hash"] = payload_hash(entry["payload_canonical"])
        stream = entry["submission_id"]
        entry["prev_hash"] = previous.get(stream, GENESIS_PREV_HASH)
        entry["entry_hash"] = entry_hash(
            stream, entry["stream_seq"], entry["kind"], entry["payload_hash"], entry["prev_hash"], "engine-1"
        )
        previous[stream] = entry["entry_hash"]
    return rewritten


def test_proof_node_ranges_match_the_engine_proofs() -> None:
    from ledger.translog.audit import consistency_ranges, inclusion_ranges

    for size in range(1, len(LEAVES) + 1):
        for index in range(size):
            ranges = inclusion_ranges(index, size)
            assert [root_from_leaf_hashes(LEAVES[s:e]) for s, e in ranges] == inclusion_proof(
                LEAVES[:size], index
            )
        for old in range(size + 1):
            ranges = consistency_ranges(old, size)
            assert [root_from_leaf_hashes(LEAVES[s:e]) for s, e in ranges] == consistency_proof(
                LEAVES, old, size
            )


def _locate(entries: list[dict[str, Any]], *inclusions: tuple[int, int]) -> str:
    auditor = _auditor()
    for index, size in inclusions:
        auditor.check_bundle(f"inclusion {index}/{size}", _inclusion(index, size))
    auditor.check_entries("entries.jsonl", _entries_lines(entries))
    (failure, *_) = auditor.report.failures
    return failure.message


def test_a_consistent_rewrite_is_located_between_checkpoints_without_proofs() -> None:
    assert "the first altered entry has global_seq in 9..13" in _locate(_rewritten(9))


def test_inclusion_proofs_narrow_a_consistent_rewrite_down_to_the_first_bad_leaf() -> None:
    assert "has global_seq in 9..12" in _locate(_rewritten(9), (12, 13))
    message = _locate(_rewritten(9), (12, 13), (9, 13))
    assert "the first altered entry is global_seq 10 " in message and "proven node(s)" in message
    assert "is global_seq 13 " in _locate(_rewritten(12), (0, 13), (12, 13))
