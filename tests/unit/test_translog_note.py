"""Signed checkpoints: the C2SP signed-note vector, the checkpoint format, and mutated notes."""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.translog.note import (
    Checkpoint,
    NoteError,
    key_id,
    open_checkpoint,
    parse_signed_note,
    sign_checkpoint,
    sign_note,
    verifier_key,
)

# golang.org/x/mod/sumdb/note's documented example key and signed note (Ed25519 is deterministic).
GO_SIGNER = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VERIFIER = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
)
GO_SIGNATURE = "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM="

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
OTHER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
ROOT = hashlib.sha256(b"root").digest()
CHECKPOINT = Checkpoint("example.org/ledger", 13, ROOT, "2026-11-21T12:00:00Z")


def _go_key() -> Ed25519PrivateKey:
    material = base64.b64decode(GO_SIGNER.split("+", 4)[4])
    return Ed25519PrivateKey.from_private_bytes(material[1:])


def test_signatures_are_byte_identical_to_the_go_signed_note_vector() -> None:
    key = _go_key()
    assert sign_note(GO_TEXT, "PeterNeumann", key) == f"{GO_TEXT}\n\u2014 PeterNeumann {GO_SIGNATURE}\n"
    assert key_id("PeterNeumann", key.public_key()).hex() == "c74f20a3"
    assert verifier_key("PeterNeumann", key.public_key()) == GO_VERIFIER


def test_the_go_vector_parses_into_text_and_one_signature() -> None:
    signed = parse_signed_note(f"{GO_TEXT}\n\u2014 PeterNeumann {GO_SIGNATURE}\n")
    assert signed.text == GO_TEXT
    (signature,) = signed.signatures
    assert (signature.name, signature.key_id.hex()) == ("PeterNeumann", "c74f20a3")
    _go_key().public_key().verify(signature.signature, GO_TEXT.encode())


def test_checkpoint_note_is_origin_size_base64_root_and_signed_timestamp() -> None:
    note = sign_checkpoint(CHECKPOINT, KEY)
    lines = note.split("\n")
    assert lines[:5] == [
        "example.org/ledger",
        "13",
        base64.b64encode(ROOT).decode(),
        "timestamp 2026-11-21T12:00:00Z",
        "",
    ]
    assert lines[5].startswith("\u2014 example.org/ledger ")
    assert open_checkpoint(note, KEY.public_key()) == CHECKPOINT
    assert open_checkpoint(note, KEY.public_key(), "example.org/ledger") == CHECKPOINT


def test_witness_cosignatures_by_other_keys_are_ignored() -> None:
    note = sign_checkpoint(CHECKPOINT, KEY)
    cosigned = note + sign_note(CHECKPOINT.note_text(), "witness.example", OTHER_KEY).split("\n\n")[1]
    assert open_checkpoint(cosigned, KEY.public_key()) == CHECKPOINT


def _replace_line(note: str, number: int, value: str) -> str:
    lines = note.split("\n")
    lines[number] = value
    return "\n".join(lines)


def _flip_signature_bit(note: str, bit: int) -> str:
    text, _, line = note.rstrip("\n").rpartition("\n")
    prefix, _, encoded = line.rpartition(" ")
    raw = bytearray(base64.b64decode(encoded))
    raw[bit // 8] ^= 1 << (bit % 8)
    return f"{text}\n{prefix} {base64.b64encode(bytes(raw)).decode()}\n"


NOTE = sign_checkpoint(CHECKPOINT, KEY)
MUTATIONS = {
    "size +1": _replace_line(NOTE, 1, "14"),
    "size x2": _replace_line(NOTE, 1, "26"),
    "size /2": _replace_line(NOTE, 1, "6"),
    "size leading zero": _replace_line(NOTE, 1, "013"),
    "size negative": _replace_line(NOTE, 1, "-13"),
    "size too large": _replace_line(NOTE, 1, str(2**63)),
    "root flipped": _replace_line(NOTE, 2, base64.b64encode(bytes([ROOT[0] ^ 1]) + ROOT[1:]).decode()),
    "root short": _replace_line(NOTE, 2, base64.b64encode(ROOT[:31]).decode()),
    "root not base64": _replace_line(NOTE, 2, "!" * 44),
    "origin changed": _replace_line(NOTE, 0, "example.org/other"),
    "timestamp changed": _replace_line(NOTE, 3, "timestamp 2026-11-21T12:00:01Z"),
    "timestamp missing": NOTE.replace("timestamp 2026-11-21T12:00:00Z\n", ""),
    "timestamp malformed": _replace_line(NOTE, 3, "timestamp yesterday"),
    "wrong key": sign_checkpoint(CHECKPOINT, OTHER_KEY),
    "no signature": NOTE.split("\n\n")[0] + "\n",
    "no blank line": NOTE.replace("\n\n", "\n"),
    "no final newline": NOTE.rstrip("\n"),
    "control character": NOTE.replace("example.org/ledger\n", "example.org/ledger\x07\n", 1),
    "signature garbage": NOTE.rsplit(" ", 1)[0] + " %%%\n",
    "signature truncated": NOTE.rsplit(" ", 1)[0] + " AAAA\n",
    "extra line": NOTE.replace("timestamp", "extension\ntimestamp", 1),
    "empty": "",
    **{f"signature bit {bit}": _flip_signature_bit(NOTE, bit) for bit in (0, 31, 32, 100, 543)},
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutated_checkpoints_are_rejected(name: str) -> None:
    with pytest.raises(NoteError):
        open_checkpoint(MUTATIONS[name], KEY.public_key())


def test_a_failing_signature_by_the_known_key_rejects_even_beside_a_valid_one() -> None:
    bad = _flip_signature_bit(NOTE, 200).split("\n\n")[1]
    with pytest.raises(NoteError):
        open_checkpoint(NOTE + bad, KEY.public_key())


def test_expected_origin_is_enforced() -> None:
    with pytest.raises(NoteError, match="origin"):
        open_checkpoint(NOTE, KEY.public_key(), "example.org/another-log")


def test_invalid_utf8_is_a_note_error() -> None:
    with pytest.raises(NoteError, match="UTF-8"):
        open_checkpoint(NOTE.encode() + b"\xff\n", KEY.public_key())


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=400), st.text(max_size=400)))
def test_arbitrary_input_is_rejected_with_a_note_error(data: bytes | str) -> None:
    with pytest.raises(NoteError):
        open_checkpoint(data, KEY.public_key())
