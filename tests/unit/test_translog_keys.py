"""The signing key lives in files outside the database: PEM PKCS#8 (0600) and PATH.pub."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from ledger.translog.keys import SigningKeyError, generate_key_files, load_private_key, load_public_key
from ledger.translog.note import public_key_bytes, verifier_key


def test_keygen_writes_a_private_key_only_its_owner_can_read_and_a_public_key(tmp_path: Path) -> None:
    pub_path, _public_key = generate_key_files(tmp_path / "log.key")
    assert stat.S_IMODE((tmp_path / "log.key").stat().st_mode) == 0o600
    assert pub_path == tmp_path / "log.key.pub"
    assert (tmp_path / "log.key").read_text().startswith("-----BEGIN PRIVATE KEY-----")
    private = load_private_key(tmp_path / "log.key")
    assert public_key_bytes(private.public_key()) == public_key_bytes(load_public_key(pub_path))


def test_keygen_refuses_to_overwrite_unless_forced(tmp_path: Path) -> None:
    generate_key_files(tmp_path / "k")
    with pytest.raises(SigningKeyError, match="already exists"):
        generate_key_files(tmp_path / "k")
    generate_key_files(tmp_path / "k", overwrite=True)


def test_a_private_key_readable_by_others_is_refused(tmp_path: Path) -> None:
    generate_key_files(tmp_path / "k")
    (tmp_path / "k").chmod(0o644)
    with pytest.raises(SigningKeyError, match="chmod 600"):
        load_private_key(tmp_path / "k")


def test_non_ed25519_and_garbage_keys_are_refused(tmp_path: Path) -> None:
    ec = generate_private_key(SECP256R1()).private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    (tmp_path / "ec").write_bytes(ec)
    (tmp_path / "ec").chmod(0o600)
    with pytest.raises(SigningKeyError, match="not an Ed25519"):
        load_private_key(tmp_path / "ec")
    (tmp_path / "junk").write_text("hello")
    with pytest.raises(SigningKeyError):
        load_public_key(tmp_path / "junk")
    with pytest.raises(SigningKeyError, match="cannot read"):
        load_public_key(tmp_path / "missing")


def test_a_verifier_key_string_loads_and_its_id_is_checked(tmp_path: Path) -> None:
    _, public_key = generate_key_files(tmp_path / "k")
    (tmp_path / "vkey").write_text(verifier_key("example.org/log", public_key) + "\n")
    assert public_key_bytes(load_public_key(tmp_path / "vkey")) == public_key_bytes(public_key)
    _name, _, rest = verifier_key("example.org/log", public_key).partition("+")
    (tmp_path / "bad").write_text(f"example.org/other+{rest}")
    with pytest.raises(SigningKeyError, match="id does not match"):
        load_public_key(tmp_path / "bad")


def test_verifier_keys_whose_base64_contains_plus_signs_load(tmp_path: Path) -> None:
    for attempt in range(40):  # about a third of random keys put a '+' in their base64
        _, public_key = generate_key_files(tmp_path / f"k{attempt}")
        text = verifier_key("example.org/log", public_key)
        (tmp_path / f"v{attempt}").write_text(text)
        assert public_key_bytes(load_public_key(tmp_path / f"v{attempt}")) == public_key_bytes(public_key)
