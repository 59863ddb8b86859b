"""The checkpoint signing key: an Ed25519 key in a file outside the database.

``generate_key_files(path)`` writes the private key as PEM PKCS#8 with mode 0600 and the public
key beside it (``path.pub``, PEM SubjectPublicKeyInfo, what auditors are given). Nothing here
touches the database; the private key is never stored there.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    load_pem_private_key,
    load_pem_public_key,
)

from ledger.translog.note import key_id

__all__ = [
    "SigningKeyError",
    "generate_key_files",
    "load_private_key",
    "load_public_key",
    "public_key_path",
]

MAX_KEY_FILE_BYTES = 16 * 1024


class SigningKeyError(ValueError):
    """A key file is missing, unreadable, not Ed25519, or too widely readable."""


def public_key_path(private_path: Path) -> Path:
    """Where the public key of ``private_path`` lives: the same name plus ``.pub``."""
    return private_path.with_name(private_path.name + ".pub")


def generate_key_files(path: Path, *, overwrite: bool = False) -> tuple[Path, Ed25519PublicKey]:
    """Create a new Ed25519 key at ``path`` (0600) and ``path.pub``; refuses to overwrite by default."""
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    public_pem = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, flags, 0o600)
    except FileExistsError:
        raise SigningKeyError(f"{path} already exists; pass --force to replace it") from None
    with os.fdopen(descriptor, "wb") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.write(private_pem)
    pub_path = public_key_path(path)
    pub_path.write_bytes(public_pem)
    return pub_path, key.public_key()


def _read(path: Path) -> bytes:
    try:
        with path.open("rb") as handle:  # bounded: a device or FIFO reports no size and may never end
            data = handle.read(MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        raise SigningKeyError(f"cannot read key file {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_KEY_FILE_BYTES:
        raise SigningKeyError(f"{path} is larger than {MAX_KEY_FILE_BYTES} bytes: not a key file")
    return data


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """Load the PEM PKCS#8 Ed25519 private key; refuses files readable by group or others."""
    data = _read(path)
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SigningKeyError(
            f"{path} is accessible by group or others (mode {oct(mode & 0o777)}); chmod 600 it"
        )
    try:
        key = load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise SigningKeyError(f"{path} is not an unencrypted PEM private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyError(f"{path} holds a {type(key).__name__}, not an Ed25519 key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """Load an Ed25519 public key: PEM SubjectPublicKeyInfo, or a ``name+id+base64`` verifier key."""
    data = _read(path).strip()
    if data.startswith(b"-----BEGIN"):
        try:
            key = load_pem_public_key(data)
        except (ValueError, TypeError) as exc:
            raise SigningKeyError(f"{path} is not a PEM public key: {exc}") from None
        if not isinstance(key, Ed25519PublicKey):
            raise SigningKeyError(f"{path} holds a {type(key).__name__}, not an Ed25519 key")
        return key
    parts = data.split(b"+", 2)  # base64 may itself contain "+"; name and key id never do
    if len(parts) != 3:
        raise SigningKeyError(f"{path} is neither a PEM public key nor a 'name+keyid+base64' verifier key")
    try:
        raw = base64.b64decode(parts[2], validate=True)
    except (binascii.Error, ValueError):
        raise SigningKeyError(f"{path}: the verifier key's last part is not base64") from None
    if len(raw) != 33 or raw[0] != 1:
        raise SigningKeyError(f"{path}: the verifier key is not an Ed25519 (type 0x01) key")
    key = Ed25519PublicKey.from_public_bytes(raw[1:])
    name = parts[0].decode("utf-8", "replace")
    if parts[1].decode("ascii", "replace") != key_id(name, key).hex():
        raise SigningKeyError(f"{path}: the verifier key's id does not match its name and key")
    return key
